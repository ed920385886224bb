"""A user's DDP script that profiles its steps (StepProfiler): argv steps (default 20), step sleep seconds (default 0.05), slow rank (-1: none)."""
import sys, time
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from distlab.rank.profile import StepProfiler

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
sleep_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.05
slow_rank = int(sys.argv[3]) if len(sys.argv) > 3 else -1
dist.init_process_group("gloo")
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
prof = StepProfiler(model)
batches = ((torch.randn(16, 32), torch.randint(0, 4, (16,))) for _ in range(steps))
for x, y in prof.data(batches):
    loss = nn.functional.cross_entropy(model(x), y)
    time.sleep(sleep_s * (3 if dist.get_rank() == slow_rank else 1))  # the "compute" of a bigger model
    opt.zero_grad(); loss.backward(); opt.step()
    prof.step_done(loss=round(loss.item(), 4), samples=len(x))
prof.close()
print("done", dist.get_rank(), flush=True)
dist.destroy_process_group()
