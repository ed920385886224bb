"""NCCL, one GPU: a collective on a tensor left on the CPU (a metric built with torch.tensor(...) and no device=)."""
import os
import torch, torch.distributed as dist

def main():
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl")
    try:
        loss_sum = torch.tensor([2.5, 4.0])  # on the CPU: NCCL reduces only CUDA tensors
        dist.all_reduce(loss_sum)
        print(loss_sum)
    finally:
        dist.destroy_process_group()

if __name__ == "__main__": main()
