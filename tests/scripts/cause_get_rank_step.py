"""A loop at module level whose metric is all-reduced by rank 0 alone, at step 3: `if step == 3 and dist.get_rank() == 0:`."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
torch.manual_seed(0)
model = DDP(torch.nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    loss = model(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad()
    loss.backward()  # MARK:backward
    opt.step()
    if step == 3 and dist.get_rank() == 0:
        metric = loss.detach().clone()
        dist.all_reduce(metric)  # MARK:metric
        print(f"step {step}: mean loss {metric.item() / dist.get_world_size():.4f}", flush=True)
dist.destroy_process_group()
