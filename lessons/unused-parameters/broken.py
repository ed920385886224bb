"""Fine-tuning a classifier that still carries the second head it was pre-trained with.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

BATCH, STEPS = 16, 30


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
        self.head = nn.Linear(128, 4)
        self.aux = nn.Linear(128, 4)  # pre-training's second head: forward never uses it, so it never gets a gradient

    def forward(self, x):
        return self.head(self.body(x))


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(0)
    n = STEPS * BATCH * world
    x, y = torch.randn(n, 32), torch.randint(0, 4, (n,))
    model = DDP(Net().to(device))  # BUG: plain DDP waits for a gradient of every parameter in every backward, and aux never gets one
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(STEPS):
        rows = slice((step * world + rank) * BATCH, (step * world + rank + 1) * BATCH)
        loss = nn.functional.cross_entropy(model(x[rows].to(device)), y[rows].to(device))
        opt.zero_grad()
        loss.backward()  # DDP all-reduces the gradients here, bucket by bucket
        if step == 0:
            missing = [name for name, p in model.module.named_parameters() if p.grad is None]
            print(f"rank {rank}: parameters without a gradient: {missing}", flush=True)
        opt.step()
        if step % 10 == 0: print(f"rank {rank}: step {step} loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
