"""A socket-interface variable copied from another machine: the ranks are told to talk over an interface this one lacks.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
`distlab doctor --env GLOO_SOCKET_IFNAME=eth9` names the problem before any rank starts.
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, BATCH = 5, 4


def main():
    cuda = torch.cuda.is_available()
    os.environ["GLOO_SOCKET_IFNAME"] = "eth9"  # BUG: the interface of the cluster this line was copied from; this machine has none of that name
    os.environ["NCCL_SOCKET_IFNAME"] = "eth9"  # BUG: the same for NCCL, read when it builds its first communicator
    dist.init_process_group("nccl" if cuda else "gloo")  # gloo binds its connections to the interface's address here
    rank = dist.get_rank()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(0)
    model = DDP(nn.Linear(8, 2).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    for step in range(STEPS):
        loss = model(torch.randn(BATCH, 8, generator=g).to(device)).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # DDP's gradient all-reduce, over the interface chosen at init
        opt.step()
    print(f"rank {rank}: {STEPS} steps, last loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
