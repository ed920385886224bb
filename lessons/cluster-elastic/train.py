"""cluster-network/train.py made elastic: it survives a node leaving. Start it on each node with
`torchrun --nnodes 1:2 --max-restarts 3 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint NODE0:29400
--rdzv-conf last_call_timeout=5 train.py [STEPS] [CHECKPOINT_DIR]`. Rank 0 saves a checkpoint every few steps;
every start resumes from the newest one. A collective whose peer vanished raises after a few seconds, torchrun
restarts the ranks left, the rendezvous re-forms the group with the nodes that answer, and training goes on."""
import os
import socket
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
ckpt_dir = Path(sys.argv[2] if len(sys.argv) > 2 else "checkpoints")  # on node 0, where rank 0 runs
EVERY = 5  # steps between checkpoints: the most work a failure can cost
backend = "nccl" if torch.cuda.is_available() else "gloo"
dist.init_process_group(backend)  # gloo connects every pair of ranks here, on ports the system picks
rank, world = dist.get_rank(), dist.get_world_size()
device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if backend == "nccl" else torch.device("cpu")
if backend == "nccl": torch.cuda.set_device(device)
# the group training uses: a collective whose peer is gone raises after 10 s instead of waiting 30 minutes
group = dist.new_group(backend=backend, timeout=timedelta(seconds=10))
print(f"rank {rank} of {world} joined on {socket.gethostname()}", flush=True)

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8)).to(device)
opt = torch.optim.SGD(net.parameters(), lr=0.05)  # plain SGD keeps no state: the weights and the step are all there is to save
start = torch.zeros(1, dtype=torch.long, device=device)
saved = sorted(ckpt_dir.glob("step*.pt"))
if rank == 0 and saved:  # only rank 0 reads the checkpoint; DDP copies its weights to every rank below
    state = torch.load(saved[-1], map_location=device)
    net.load_state_dict(state["model"]); opt.load_state_dict(state["opt"]); start[0] = state["step"]
    print(f"resumed from {saved[-1].name} at step {state['step']} with {world} rank(s)", flush=True)
dist.broadcast(start, 0, group=group)
model = DDP(net, process_group=group)  # broadcasts rank 0's weights to every rank
for step in range(int(start), steps):
    gen = torch.Generator().manual_seed(1000 * step + rank)  # a step's data depends on the step and the rank alone: a resumed run sees the same
    x = torch.randn(32, 64, generator=gen).to(device)
    y = torch.randint(0, 8, (32,), generator=gen).to(device)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()  # DDP all-reduces the gradients across the nodes here
    opt.step()
    print(f"step {step} loss {loss.item():.6f} on {socket.gethostname()}", flush=True)
    if rank == 0 and (step + 1) % EVERY == 0:  # written whole, then renamed: a crash mid-write leaves the last one intact
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        tmp = ckpt_dir / f".step{step + 1:06d}.tmp"
        torch.save({"step": step + 1, "model": net.state_dict(), "opt": opt.state_dict()}, tmp)
        tmp.replace(ckpt_dir / f"step{step + 1:06d}.pt")
    time.sleep(0.1)  # a real step's compute; keeps the run long enough to cut a link in the middle

dist.destroy_process_group()
print(f"rank {rank} done", flush=True)
