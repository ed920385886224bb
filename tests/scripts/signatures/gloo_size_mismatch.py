"""Two ranks all-reduce tensors of different sizes under the same collective (rank 1 pads its batch stats)."""
import torch, torch.distributed as dist

def main():
    dist.init_process_group("gloo")
    try:
        n = 1024 if dist.get_rank() == 0 else 1536
        t = torch.ones(n)
        dist.all_reduce(t)
        print("reduced", t[:4], flush=True)
    finally:
        dist.destroy_process_group()

if __name__ == "__main__": main()
