"""A loop at module level whose metric only rank 0 averages, at step 3, with a helper that all-reduces:
`if step == 3 and dist.get_rank() == 0:` (no word ends after `get_rank`, and the collective is one call down)."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def mean_over_ranks(value):
    t = torch.tensor([value])
    dist.all_reduce(t)  # MARK:metric
    return t.item() / dist.get_world_size()


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
        print(f"step {step}: mean loss {mean_over_ranks(loss.item()):.4f}", flush=True)  # MARK:call
dist.destroy_process_group()
