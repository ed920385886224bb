"""Rank-conditional collective: rank 0 evaluates the model every few steps, and evaluating all-reduces.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, EVAL_EVERY, BATCH = 6, 2, 8


def evaluate(model, x, y):
    "Validation loss and accuracy over every rank's share of the validation set."
    with torch.no_grad():
        out = model(x)
        sums = torch.stack([nn.functional.cross_entropy(out, y, reduction="sum"),
                            (out.argmax(1) == y).sum().float(), torch.tensor(float(len(y)), device=x.device)])
    dist.all_reduce(sums)  # adds up every rank's sums: every rank must call it
    return (sums[0] / sums[2]).item(), (sums[1] / sums[2]).item()


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(0)  # the same model and data on every rank; each takes its own rows
    x, y = torch.randn(STEPS * BATCH * world, 32), torch.randint(0, 4, (STEPS * BATCH * world,))
    vx, vy = torch.randn(64, 32)[rank::world].to(device), torch.randint(0, 4, (64,))[rank::world].to(device)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    for step in range(STEPS):
        rows = slice((step * world + rank) * BATCH, (step * world + rank + 1) * BATCH)
        loss = nn.functional.cross_entropy(model(x[rows].to(device)), y[rows].to(device))
        opt.zero_grad()
        loss.backward()  # DDP's gradient all-reduce: every rank, every step
        opt.step()
        if rank == 0 and (step + 1) % EVAL_EVERY == 0:  # rank 0 alone, so no collective in here
            with torch.no_grad():
                out = model.module(vx)
            val_loss, val_acc = nn.functional.cross_entropy(out, vy).item(), (out.argmax(1) == vy).float().mean().item()
            print(f"step {step + 1}: val loss {val_loss:.3f}, accuracy {val_acc:.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
