"""A deeper MLP trained with SGD and momentum at a high learning rate, on 2 ranks.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

BATCH, STEPS, LR = 16, 40, 4.0


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(0)
    n = STEPS * BATCH * world
    x = torch.randn(n, 32)
    y = (x @ torch.randn(32, 4)).argmax(1)
    layers = [nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 4)]
    model = DDP(nn.Sequential(*layers).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)  # BUG: lr 4 with momentum from the very first step: the updates overshoot and grow
    for step in range(STEPS):
        rows = slice((step * world + rank) * BATCH, (step * world + rank + 1) * BATCH)
        loss = nn.functional.cross_entropy(model(x[rows].to(device)), y[rows].to(device))
        opt.zero_grad()
        loss.backward()  # DDP averages the gradients: one non-finite gradient makes every rank's non-finite
        opt.step()
        print(f"rank {rank}: step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
