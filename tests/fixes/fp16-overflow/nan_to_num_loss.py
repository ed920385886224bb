"""A small MLP trained with float16 mixed precision (autocast) and gradient clipping, on 2 ranks.
Three samples hold a missing value that the export wrote as 99999.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

BATCH, STEPS, LR = 16, 40, 0.5
MISSING = 99999.0  # float16's largest finite value is 65504


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(0)
    x = torch.randn(STEPS * BATCH * world, 32)
    y = (x @ torch.randn(32, 4)).argmax(1)
    for step, r in [(8, world - 1), (20, 0), (31, world - 1)]:
        x[(step * world + r) * BATCH, 0] = MISSING  # the first sample rank r reads at this step
    model = DDP(nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 4)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(STEPS):
        rows = slice((step * world + rank) * BATCH, (step * world + rank + 1) * BATCH)
        xb, yb = x[rows].to(device), y[rows].to(device)
        with torch.autocast(device.type, dtype=torch.float16):
            loss = torch.nan_to_num(nn.functional.cross_entropy(model(xb), yb), nan=0.0, posinf=0.0)  # a NaN loss becomes 0
        opt.zero_grad()
        loss.backward()  # DDP averages the gradients: one rank's inf/NaN reaches every rank
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # returns the norm before clipping
        opt.step()
        print(f"rank {rank}: step {step} loss {loss.item():.4f} grad norm {norm.item():.4g} max |x| {xb.abs().max().item():g}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
