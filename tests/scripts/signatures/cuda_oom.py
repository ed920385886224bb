"""One GPU: a training step asks for more activation memory than the GPU has (the real CUDA out-of-memory error)."""
import os
import torch, torch.distributed as dist

def main():
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl")
    try:
        model = torch.nn.Linear(4096, 4096).cuda()
        x = torch.randn(1024, 4096, device="cuda")
        print(f"step 0 loss {model(x).float().pow(2).mean().item():.4f}", flush=True)
        free, total = torch.cuda.mem_get_info()
        acts = torch.empty(int(total * 1.5), dtype=torch.uint8, device="cuda")  # activations of a batch far too large
        print(acts.shape)
    finally:
        dist.destroy_process_group()

if __name__ == "__main__": main()
