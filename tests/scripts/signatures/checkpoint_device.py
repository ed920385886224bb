"""A checkpoint whose tensors name cuda:1, as a save on GPU 1 writes them, loaded without map_location: on a machine
without CUDA (or with one GPU) torch.load cannot put them back there."""
import io, torch

def main():
    torch.serialization.register_package(0, lambda storage: "cuda:1", lambda storage, location: None)  # tag as cuda:1 does
    buf = io.BytesIO()
    torch.save({"model": {"w": torch.zeros(2)}, "step": 1200}, buf)
    buf.seek(0)
    ckpt = torch.load(buf, weights_only=True)  # no map_location: each tensor goes to the device the file names
    print(ckpt["step"])

if __name__ == "__main__": main()
