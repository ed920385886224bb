"""A user's own DDP training script, unmodified: no distlab import. argv: steps (default 8)."""
import sys
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 8
dist.init_process_group("gloo")
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(steps):
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
print("done", dist.get_rank(), round(loss.item(), 4), flush=True)
dist.destroy_process_group()
