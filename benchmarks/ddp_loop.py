"""A user-like DDP training loop (no distlab import) for the benchmarks.

--steps N            steps to time (after --warmup)
--diverge-at K       at step K the last rank diverges: `stall` (deadlocks on a lock it already holds, in user
                     code), `sleep` (sleeps in user code, as a rank doing slow I/O would) or `mismatch`
                     (issues a barrier where the others all-reduce gradients); it prints the wall time
                     of the moment it diverges, `DIVERGE_T <t>`, so the benchmark can time the diagnosis.
Each rank prints `STEP_MS <mean ms per timed step>` at the end.
"""
import argparse, gc, sys, threading, time
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=200)
ap.add_argument("--warmup", type=int, default=20)
ap.add_argument("--width", type=int, default=512)
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--diverge-at", type=int, default=-1)
ap.add_argument("--how", choices=["stall", "sleep", "mismatch"], default="stall")
a = ap.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(a.width, a.width), nn.ReLU(), nn.Linear(a.width, a.width), nn.ReLU(), nn.Linear(a.width, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(a.batch, a.width), torch.randint(0, 10, (a.batch,))
t0 = None
for step in range(a.warmup + a.steps):
    if step == a.warmup: t0 = time.perf_counter()
    if step == a.diverge_at and rank == world - 1:
        print(f"DIVERGE_T {time.time():.6f}", flush=True)
        if a.how == "stall":
            lock = threading.Lock(); lock.acquire(); lock.acquire()  # a deadlock: waits for itself forever
        elif a.how == "sleep": time.sleep(600)
        else: dist.barrier()
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
print(f"STEP_MS {(time.perf_counter() - t0) * 1000 / a.steps:.4f}", flush=True)
del model, opt
gc.collect()  # torch 2.13 + gloo may abort at exit if DDP's reducer outlives the process group
dist.destroy_process_group()
