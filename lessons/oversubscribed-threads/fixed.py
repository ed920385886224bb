"""Oversubscribed threads, fixed: each rank takes its share of the cores.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

BATCH, STEPS = 64, 20


def main():
    cores, ranks_here = len(os.sched_getaffinity(0)), int(os.environ.get("LOCAL_WORLD_SIZE", 1))  # FIX: the cores this process may use, and the ranks sharing them
    torch.set_num_threads(max(1, cores // ranks_here))  # FIX: each rank its share
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")  # rank and world size come from torchrun
    rank = dist.get_rank()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(rank)
    xs, ys = torch.randn(STEPS * BATCH, 256), torch.randint(0, 10, (STEPS * BATCH,))  # in memory: nothing to wait for
    model = DDP(nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(STEPS):
        x, y = xs[step * BATCH:(step + 1) * BATCH].to(device), ys[step * BATCH:(step + 1) * BATCH].to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"rank {rank}: {STEPS} steps with {torch.get_num_threads()} intra-op threads, last loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
