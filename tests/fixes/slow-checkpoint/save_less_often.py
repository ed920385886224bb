"""Slow checkpoint: every 10 steps rank 0 writes the whole training state to shared storage, and every rank waits for it.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
In the lesson $CKPT_DIR is a volume whose writes the kernel holds to 80 MB/s, as a shared file system's might be
(`distlab show slow-checkpoint`); run alone, the checkpoints go to ./checkpoints at your own disk's speed.
"""
import os, time
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, SAVE_EVERY = 32, 30  # a learner's try: save a third as often, so the stalls cost a third
CKPT_DIR = os.environ.get("CKPT_DIR") or os.path.join(os.environ.get("DISTLAB_RUN_DIR", "."), "checkpoints")  # in the lesson: a volume written at 80 MB/s


def write(state, step):
    "Write `state` as checkpoint `step`: a temporary file, fsync (on disk before it counts), rename."
    path, t0 = os.path.join(CKPT_DIR, f"step-{step:06d}.pt"), time.perf_counter()
    with open(path + ".tmp", "wb") as f:
        torch.save(state, f)
        f.flush(); os.fsync(f.fileno())
    os.replace(path + ".tmp", path)
    print(f"rank {dist.get_rank()}: saved step {step}, {os.path.getsize(path)} bytes in {time.perf_counter() - t0:.3f} s", flush=True)


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")  # rank and world size come from torchrun
    rank = dist.get_rank()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")
    os.makedirs(CKPT_DIR, exist_ok=True)

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 512), nn.ReLU(), nn.Linear(512, 10)).to(device))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)  # two moments per weight: the state is 3x the model
    for step in range(STEPS):
        g = torch.Generator().manual_seed(step * 100 + rank)
        x, y = torch.randn(64, 512, generator=g).to(device), torch.randint(0, 10, (64,), generator=g).to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()  # DDP all-reduces the gradients here: every rank waits for the last to arrive
        opt.step()
        if (step + 1) % SAVE_EVERY == 0:
            if rank == 0:
                write({"model": model.module.state_dict(), "optimizer": opt.state_dict(), "step": step + 1}, step + 1)  # BUG: on the training path
            dist.barrier()  # BUG: every rank waits here until rank 0 has written
    print(f"rank {rank}: {STEPS} steps, last loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
