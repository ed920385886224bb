"""Init hang: a script written to run under both srun and torchrun, started by torchrun inside a Slurm allocation.

Run it on 2 ranks:  SLURM_NTASKS=8 distlab launch --nproc-per-node 2 broken.py
(SLURM_NTASKS=8 is what `sbatch --ntasks 8` puts in the environment of every process of the job.)
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, BATCH = 4, 8


def main():
    cuda = torch.cuda.is_available()
    rank = int(os.environ["RANK"])  # set by torchrun for each process it starts
    world = int(os.environ.get("SLURM_NTASKS", os.environ["WORLD_SIZE"]))  # BUG: Slurm's task count wins over torchrun's world size
    print(f"rank {rank}: joining a world of {world}", flush=True)
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world)
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
