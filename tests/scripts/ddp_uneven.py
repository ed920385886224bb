"""A DDP loop whose last rank gets one batch fewer (dataset not divisible by world size), then a barrier
(or, with `--no-barrier`, straight to the exit)."""
import sys
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    n_batches = 4 if rank < world - 1 else 3  # the bug: uneven shards
    for step in range(n_batches):
        x = torch.randn(8, 16)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # MARK:backward
        opt.step()
        print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    if "--no-barrier" not in sys.argv:
        dist.barrier()  # MARK:barrier
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
