"""Small buckets: a deep, narrow model whose gradients DDP all-reduces in buckets of 5 kB, one per layer.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
In the lesson the watch records every bucket's all-reduce (`distlab show small-buckets`).
"""
import os, time
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

LAYERS, WIDTH, BATCH, STEPS = 48, 64, 32, 30  # a deep, narrow MLP: 48 layers of 64 x 64, 0.8 MB of gradients


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")  # rank and world size come from torchrun
    rank = dist.get_rank()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(0)
    layers = [m for _ in range(LAYERS) for m in (nn.Linear(WIDTH, WIDTH), nn.ReLU())]
    net = nn.Sequential(*layers, nn.Linear(WIDTH, 10)).to(device)
    model = DDP(net, bucket_cap_mb=0.5)  # my fix: half-megabyte buckets, two per step, the first while backward still runs
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(BATCH, WIDTH, generator=g).to(device), torch.randint(0, 10, (BATCH,), generator=g).to(device)
    for step in range(STEPS):
        if step == 2: start = time.perf_counter()  # timing from step 2: DDP builds its buckets in the first step
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()  # DDP all-reduces each bucket as soon as backward has produced its gradients
        opt.step()
    ms = (time.perf_counter() - start) / (STEPS - 2) * 1e3
    print(f"rank {rank}: {STEPS} steps, {ms:.1f} ms per step, last loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
