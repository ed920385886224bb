"""Straggler: each rank trains on an equal share of every global batch, though one rank computes slower.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
In the lesson the last rank runs under a CPU quota, a slower device's stand-in (`distlab show straggler`).
"""
import os, time
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

GLOBAL_BATCH, STEPS, CALIBRATE = 1024, 40, 4  # samples per step (all ranks together), steps, warm-up steps


def split(total, speeds):
    "`total` samples in proportion to `speeds`, at least one each."
    shares = [max(1, int(total * s / sum(speeds))) for s in speeds]
    shares[speeds.index(max(speeds))] += total - sum(shares)
    return shares


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")  # rank and world size come from torchrun
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(0)
    xs, ys = torch.randn(4096, 256), torch.randint(0, 10, (4096,))
    model = DDP(nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    shares = split(GLOBAL_BATCH, [1.0] * world)  # BUG: equal shares, whatever each rank's speed
    for step in range(STEPS):
        start = (step * GLOBAL_BATCH) % (len(xs) - GLOBAL_BATCH) + sum(shares[:rank])
        x, y = xs[start:start + shares[rank]].to(device), ys[start:start + shares[rank]].to(device)
        # summed, then scaled: DDP averages over ranks, and this makes that the mean over the global batch
        loss = nn.functional.cross_entropy(model(x), y, reduction="sum") * world / GLOBAL_BATCH
        opt.zero_grad()
        loss.backward()  # DDP all-reduces the gradients here: every rank waits for the slowest
        opt.step()
    print(f"rank {rank}: {STEPS} steps, share {shares[rank]} of {GLOBAL_BATCH} samples, last loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
