"""A healthy DDP run at world 2 on gloo: a few steps of a small MLP, then a clean shutdown (matches no signature)."""
import os, torch, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    try:
        torch.manual_seed(0)
        model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(rank)
        for step in range(5):
            x, y = torch.randn(32, 8, generator=g), torch.randn(32, 1, generator=g)
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
            print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
        dist.barrier()
        if rank == 0: print("training finished", flush=True)
    finally:
        dist.destroy_process_group()

if __name__ == "__main__": main()
