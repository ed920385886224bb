"""A DDP training run whose step is compute, meant for several nodes: `torchrun --nnodes 2 --nproc-per-node 1
--rdzv-backend c10d --rdzv-endpoint NODE0:29400 train.py [STEPS]` on each node. Nothing in it is wrong: in this
lesson one node is slower (its CPU time is capped), and the same script runs on the broken and the fixed cluster."""
import os
import socket
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
backend = "nccl" if torch.cuda.is_available() else "gloo"
dist.init_process_group(backend)
rank, world = dist.get_rank(), dist.get_world_size()
device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if backend == "nccl" else torch.device("cpu")
if backend == "nccl": torch.cuda.set_device(device)
print(f"rank {rank} of {world} joined on {socket.gethostname()}", flush=True)

torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(device))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
gen = torch.Generator().manual_seed(rank)
for step in range(steps):
    x = torch.randn(128, 256, generator=gen).to(device)  # every node gets the same work: 128 samples a step
    y = torch.randint(0, 10, (128,), generator=gen).to(device)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()  # DDP all-reduces the gradients here: every rank waits for the slowest node's
    opt.step()
    print(f"step {step} loss {loss.item():.4f} on {socket.gethostname()}", flush=True)

dist.destroy_process_group()
print(f"rank {rank} done", flush=True)
