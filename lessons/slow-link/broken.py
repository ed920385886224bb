"""Slow link: plain DDP training whose every step all-reduces all 5.3 MB of float32 gradients over a 1 Gbit/s link.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
In the lesson the link between the ranks is EMULATED (`distlab show slow-link`): they share one machine, so the
watch holds each DDP bucket's all-reduce until its bytes would have crossed 1 Gbit/s.
"""
import os, time
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

IN, HIDDEN, OUT, BATCH, STEPS = 256, 1024, 10, 8, 30  # 1.3 M parameters: 5.3 MB of float32 gradients


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")  # rank and world size come from torchrun
    rank = dist.get_rank()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, OUT)).to(device)
    model = DDP(net)  # BUG: every backward all-reduces all 5.3 MB of float32 gradients, and the link moves 125 MB/s
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    for step in range(STEPS):
        if step == 2: start = time.perf_counter()  # timing from step 2: DDP builds its buckets in the first step
        x, y = torch.randn(BATCH, IN, generator=g).to(device), torch.randint(0, OUT, (BATCH,), generator=g).to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()  # DDP all-reduces each bucket of gradients as backward produces it, and waits for the last
        opt.step()
    ms = (time.perf_counter() - start) / (STEPS - 2) * 1e3
    print(f"rank {rank}: {STEPS} steps of {BATCH} samples, {ms:.1f} ms per step, {ms / BATCH:.2f} ms per sample, "
          f"last loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
