"""Uneven batches: each rank trains on its own slice of a dataset split by hand.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Subset, TensorDataset

BATCH, STEPS = 8, 6


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")  # rank and world size come from torchrun
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(0)
    n = world * BATCH * (STEPS - 1) + (world - 1)  # a size that does not divide evenly
    data = TensorDataset(torch.randn(n, 32), torch.randint(0, 4, (n,)))
    mine = Subset(data, range(rank, n, world))  # BUG: the last rank gets fewer samples, so one batch fewer
    loader = DataLoader(mine, batch_size=BATCH)

    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = 0
    count = torch.tensor([len(loader)])
    dist.all_reduce(count, op=dist.ReduceOp.MIN)  # every rank runs as many steps as the shortest one has
    for _, (x, y) in zip(range(int(count)), loader):
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()  # DDP all-reduces the gradients here: every rank must come, every step
        opt.step()
        steps += 1
    print(f"rank {rank}: {steps} steps, last loss {loss.item():.3f}", flush=True)
    dist.barrier()  # the end of the epoch: everyone waits here before rank 0 would save
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
