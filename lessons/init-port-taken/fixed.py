"""Init hang: the script pins the rendezvous port, and a stale job from an earlier run still listens on it.

Run it on 2 ranks:  TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 distlab launch --nproc-per-node 2 broken.py
(that variable makes rank 0 host the rendezvous store, as it does under mp.spawn, srun or one pod per rank;
`distlab run init-port-taken` also starts the stale job: a process listening on port 12355 that never answers)
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, BATCH = 4, 8


def main():
    cuda = torch.cuda.is_available()
    # FIX: MASTER_ADDR and MASTER_PORT are left as torchrun set them (a port it found free)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("nccl" if cuda else "gloo")  # reads MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(0)  # the same model and data on every rank; each takes its own rows
    x, y = torch.randn(STEPS * BATCH * world, 32), torch.randint(0, 4, (STEPS * BATCH * world,))
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(STEPS):
        rows = slice((step * world + rank) * BATCH, (step * world + rank + 1) * BATCH)
        loss = nn.functional.cross_entropy(model(x[rows].to(device)), y[rows].to(device))
        opt.zero_grad()
        loss.backward()  # DDP's gradient all-reduce: every rank, every step
        opt.step()
    print(f"rank {rank}: {STEPS} steps, last loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
