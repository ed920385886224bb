"""Rank 1 builds its model with a different hidden width (a config read per rank): DDP's constructor
compares parameter shapes across ranks and refuses."""
import torch, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

def main():
    dist.init_process_group("gloo")
    try:
        hidden = 16 if dist.get_rank() == 0 else 32
        model = DDP(nn.Sequential(nn.Linear(8, hidden), nn.ReLU(), nn.Linear(hidden, 1)))
        print("wrapped", model, flush=True)
    finally:
        dist.destroy_process_group()

if __name__ == "__main__": main()
