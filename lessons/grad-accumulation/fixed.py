"""Gradient accumulation: 4 micro-batches of 8 per rank and one optimizer step, meant to train like one big batch.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import contextlib
import copy
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

BATCH, ACCUMULATE, STEPS, LR = 8, 4, 12, 0.2


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(0)
    big = world * ACCUMULATE * BATCH  # the samples of one optimizer step, all ranks together
    x = torch.randn(STEPS * big, 32)
    y = (x @ torch.randn(32, 4)).argmax(1)
    net = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 4)).to(device)
    reference = copy.deepcopy(net)  # the check: the same steps on one process, one big batch each
    model = DDP(net)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=LR)
    for step in range(STEPS):
        for micro in range(ACCUMULATE):
            first = step * big + (micro * world + rank) * BATCH
            xb, yb = x[first:first + BATCH].to(device), y[first:first + BATCH].to(device)
            last = micro == ACCUMULATE - 1
            with contextlib.nullcontext() if last else model.no_sync():  # FIX: no all-reduce until the last micro-batch; the gradients add up locally
                loss = nn.functional.cross_entropy(model(xb), yb) / ACCUMULATE  # FIX: each micro-batch weighs 1/4, as its share of the big batch
                loss.backward()  # the last backward all-reduces the summed gradients, once per step
        opt.step()
        opt.zero_grad()

        rows = slice(step * big, (step + 1) * big)
        ref_loss = nn.functional.cross_entropy(reference(x[rows].to(device)), y[rows].to(device))
        ref_loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
        off = max((p - q).abs().max().item() for p, q in zip(net.parameters(), reference.parameters()))
        print(f"rank {rank}: step {step} big-batch loss {ref_loss.item():.5f} weights differ from the big batch's by {off:.2e}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
