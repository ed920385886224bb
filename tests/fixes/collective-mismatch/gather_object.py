"""Collective mismatch: every rank gathers its predictions on its share of the validation set.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, BATCH, VAL = 4, 8, 11  # VAL is not a multiple of the world size


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(0)
    x, y = torch.randn(STEPS * BATCH * world, 32), torch.randint(0, 4, (STEPS * BATCH * world,))
    vx, vy = torch.randn(VAL, 32), torch.randint(0, 4, (VAL,))
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(STEPS):
        rows = slice((step * world + rank) * BATCH, (step * world + rank + 1) * BATCH)
        loss = nn.functional.cross_entropy(model(x[rows].to(device)), y[rows].to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()

    with torch.no_grad():  # validation: each rank predicts its own rows, rank 0 scores them all
        mine = model.module(vx[rank::world].to(device)).argmax(1)  # the last rank has one row fewer
    gathered = [None] * world
    dist.all_gather_object(gathered, mine.cpu())  # pickled: any shape
    parts = gathered
    if rank == 0:
        order = torch.cat([torch.arange(VAL)[r::world] for r in range(world)])
        acc = (torch.cat(parts).cpu() == vy[order]).float().mean().item()
        print(f"validation accuracy over {VAL} samples: {acc:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
