"""A branch on the data: batches with an outlier also go through a second head.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

BATCH, STEPS, LIMIT = 8, 6, 5.0  # a value past LIMIT is an outlier (a glitch in the sensor)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.head = nn.Sequential(nn.Linear(32, 64), nn.ReLU()), nn.Linear(64, 4)
        self.robust = nn.Linear(64, 4)  # a correction for batches with outliers

    def forward(self, x):
        h = self.body(x)
        out = self.head(h)
        if x.abs().max() > LIMIT:  # BUG: decided per batch, so per rank: where no outlier came, `robust` gets no gradient
            out = out + self.robust(h)
        return out


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(0)
    n = STEPS * BATCH * world
    x, y = torch.randn(n, 32), torch.randint(0, 4, (n,))
    x[::37] *= 8  # every 37th sample is an outlier: sample 0 is in rank 0's first batch, none in rank 1's
    model = DDP(Net().to(device))  # BUG: plain DDP expects every parameter to get a gradient on every rank, every step
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(STEPS):
        rows = slice((step * world + rank) * BATCH, (step * world + rank + 1) * BATCH)
        try:  # my fix: skip a step that DDP refuses
            loss = nn.functional.cross_entropy(model(x[rows].to(device)), y[rows].to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
        except RuntimeError as e:
            print(f"rank {rank}: skipping step {step}: {str(e)[:50]}", flush=True)
            continue
        print(f"rank {rank}: step {step} loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
