"""Fine-tuning from pre-trained weights on 2 ranks.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import json
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

BATCH, STEPS = 16, 15


def make_net():
    return nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 4))


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(1234)
    pretrained = make_net().state_dict()  # stands for torch.load("pretrained.pt")
    torch.manual_seed(0)
    n = STEPS * BATCH * world
    x = torch.randn(n, 32)
    y = (x @ torch.randn(32, 4)).argmax(1)

    net = make_net().to(device)
    if rank == 0:
        net.load_state_dict(pretrained)  # rank 0 alone loads, but before DDP, whose copy spreads it
    model = DDP(net)  # DDP copies rank 0's weights to every rank, once, here
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(STEPS):
        rows = slice((step * world + rank) * BATCH, (step * world + rank + 1) * BATCH)
        loss = nn.functional.cross_entropy(model(x[rows].to(device)), y[rows].to(device))
        opt.zero_grad()
        loss.backward()  # DDP averages the gradients: every rank applies the same update to its own weights
        opt.step()
        if step % 5 == 4:  # a fingerprint of the weights: the norm of each parameter, to compare ranks' logs
            norms = {name: round(p.norm().item(), 6) for name, p in model.module.named_parameters()}
            print(f"rank {rank}: step {step} loss {loss.item():.4f} weight norms {json.dumps(norms)}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
