"""Two DDP ranks, a user's loop with OOMBackoff; only the last rank has a memory limit small enough to fail.

Prints `RESULT {json}` per rank: the micro-batch each step used and the back-offs; the parameters' checksum after
training (equal on every rank when the ranks stayed in step).
"""
import json, torch, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from distlab.rank.memory import MIB, apply_memory_limit
from distlab.train.memory_guards import OOMBackoff

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
g = torch.Generator().manual_seed(rank)
x, y = torch.randn(32768, 64, generator=g), torch.randint(0, 10, (32768,), generator=g)
if rank == world - 1: apply_memory_limit(40 * MIB)  # the whole batch needs ~100 MiB of activations
backoff = OOMBackoff(batch_size=len(x))
micro = []
for step in range(2):
    opt.zero_grad(set_to_none=True)
    micro.append(backoff.step((x, y), lambda xb, yb, scale: (nn.functional.cross_entropy(model(xb), yb) * scale).backward(), model))
    opt.step()
checksum = float(sum(p.double().sum() for p in model.parameters()))
print("RESULT " + json.dumps({"rank": rank, "micro": micro, "backoffs": [(b["from"], b["to"]) for b in backoff.backoffs],
                              "errors": [b["error"] for b in backoff.backoffs], "checksum": checksum}), flush=True)
dist.destroy_process_group()
