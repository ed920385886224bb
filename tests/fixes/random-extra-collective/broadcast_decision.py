"""Random logging: now and then the ranks average their loss for the log, when a coin says so.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os, random
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

BATCH, STEPS, LOG_EVERY, SEED = 8, 12, 4, 13  # log the mean loss on about one step in LOG_EVERY


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    random.seed(SEED + rank)  # BUG: a different seed per rank (meant for augmentation), and the log decision below uses it too
    torch.manual_seed(0)
    x, y = torch.randn(STEPS * BATCH * world, 32), torch.randint(0, 4, (STEPS * BATCH * world,))
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(STEPS):
        rows = slice((step * world + rank) * BATCH, (step * world + rank + 1) * BATCH)
        xb = x[rows] + 0.1 * random.random() * torch.randn(BATCH, 32)  # augmentation: per-rank noise is what we want here
        loss = nn.functional.cross_entropy(model(xb.to(device)), y[rows].to(device))
        opt.zero_grad()
        loss.backward()  # DDP all-reduces the gradients here
        opt.step()
        decide = torch.tensor([float(random.random() < 1 / LOG_EVERY)], device=device)
        dist.broadcast(decide, src=0)  # my fix: rank 0's coin decides for everyone
        if decide.item():
            mean = loss.detach().clone()
            dist.all_reduce(mean)  # an all-reduce that only the ranks whose coin said "log" call
            if rank == 0: print(f"step {step}: mean loss {mean.item() / world:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
