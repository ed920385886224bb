# A training script written the way people write them: it does not import distlab.
# Bug: only rank 0 runs the validation pass, and validation averages its loss across ranks.
import argparse
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--eval-every", type=int, default=3)
args = parser.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def validate(model):
    with torch.no_grad():
        loss = model(torch.randn(8, 16)).pow(2).mean()
    dist.all_reduce(loss)  # average across ranks ... but only rank 0 is here
    return loss.item() / dist.get_world_size()


for step in range(args.steps):
    x, y = torch.randn(8, 16), torch.randint(0, 2, (8,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if rank == 0 and (step + 1) % args.eval_every == 0:
        print(f"step {step}: val loss {validate(model):.3f}", flush=True)

dist.destroy_process_group()
