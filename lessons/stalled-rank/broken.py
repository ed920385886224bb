"""Stalled rank: rank 0 keeps a metrics log, buffered and written every few steps.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os, threading
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, BATCH, FLUSH_EVERY = 8, 8, 3


class MetricsLog:
    "Rows buffered in memory and written out every `flush_every` rows; a lock, because a reporting thread may read it."
    def __init__(self, flush_every: int):
        self.flush_every, self.lock = flush_every, threading.Lock()
        self.rows, self.written = [], []

    def record(self, row: dict):
        with self.lock:
            self.rows.append(row)
            if len(self.rows) >= self.flush_every:
                self.flush()  # BUG: flush() takes self.lock, which this thread already holds

    def flush(self):
        with self.lock:
            self.written += self.rows  # a file or a metrics server, in a real logger
            self.rows = []


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(0)  # the same model and data on every rank; each takes its own rows
    x, y = torch.randn(STEPS * BATCH * world, 32), torch.randint(0, 4, (STEPS * BATCH * world,))
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    log = MetricsLog(FLUSH_EVERY) if rank == 0 else None  # only rank 0 logs

    for step in range(STEPS):
        rows = slice((step * world + rank) * BATCH, (step * world + rank + 1) * BATCH)
        loss = nn.functional.cross_entropy(model(x[rows].to(device)), y[rows].to(device))
        opt.zero_grad()
        loss.backward()  # DDP's gradient all-reduce: every rank, every step
        opt.step()
        if log is not None: log.record({"step": step + 1, "loss": loss.item()})
    if log is not None: log.flush()
    print(f"rank {rank}: {STEPS} steps, last loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
