"""Every rank writes the checkpoint: two processes, one file, and each rank's own state in it.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 4
CKPT = os.path.join(os.environ.get("DISTLAB_RUN_DIR", "."), "checkpoints", "checkpoint.pt")  # one directory per distlab run


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, device = dist.get_rank(), torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")
    torch.manual_seed(rank)  # each rank its own random stream (dropout, augmentation): part of what a resume needs
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.Dropout(0.1), nn.Linear(64, 4)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(STEPS):
        x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad(); loss.backward(); opt.step()

    os.makedirs(os.path.dirname(CKPT), exist_ok=True)
    streams = [None] * dist.get_world_size()
    dist.all_gather_object(streams, torch.get_rng_state())  # FIX: every rank's random stream, on every rank
    state = {"model": model.module.state_dict(), "optimizer": opt.state_dict(),
             "rng": dict(enumerate(streams))}  # FIX: all of them in the one file
    if rank == 0:  # FIX: one writer (with DDP the weights are the same on every rank)
        torch.save(state, CKPT + ".tmp"); os.replace(CKPT + ".tmp", CKPT)  # FIX: whole or not at all
        print(f"rank {rank}: wrote {os.path.getsize(CKPT)} bytes to {os.path.basename(CKPT)}", flush=True)
    dist.barrier()  # nobody reads the checkpoint before it is written

    # A resume, as every rank will do it: its random stream must come back exactly.
    try:
        saved = torch.load(CKPT, map_location="cpu", weights_only=True)
        mine = saved["rng"].get(rank)
        back = "restored" if mine is not None and torch.equal(mine, torch.get_rng_state()) else "LOST"
        print(f"rank {rank}: the file holds the random streams of ranks {sorted(saved['rng'])}; mine is {back}", flush=True)
    except Exception as e:
        print(f"rank {rank}: the file does not load: {str(e)[:100]}; mine is LOST", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
