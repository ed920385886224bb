"""Checkpoint clean-up: a nightly job deletes checkpoints older than a week, and a slow job's only ones go with them.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py
"""
import glob
import os
import time
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, SAVE_EVERY = 12, 4
CKPT_DIR = os.path.join(os.environ.get("DISTLAB_RUN_DIR", "."), "checkpoints")  # one directory per distlab run


def clean_up(folder, keep=2):
    "The nightly clean-up of the checkpoint disk."
    for old in sorted(glob.glob(os.path.join(folder, "step-*.pt")))[:-keep]:  # FIX: all but the newest `keep`, by step
        os.remove(old)


def newest(folder):
    "The newest checkpoint in `folder` (by the step in its name), or None."
    found = sorted(glob.glob(os.path.join(folder, "step-*.pt")))
    return found[-1] if found else None


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, device = dist.get_rank(), torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    os.makedirs(CKPT_DIR, exist_ok=True)
    for step in range(STEPS):
        x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad(); loss.backward(); opt.step()
        if (step + 1) % SAVE_EVERY == 0:
            if rank == 0:
                path = os.path.join(CKPT_DIR, f"step-{step + 1:06d}.pt")
                torch.save({"model": model.module.state_dict(), "optimizer": opt.state_dict(), "step": step + 1}, path + ".tmp")
                os.replace(path + ".tmp", path)
            dist.barrier()
    if rank == 0:
        week_ago = time.time() - 8 * 86400  # EMULATION: the job is slow (or waited in a queue): its saves are 8 days old
        for f in glob.glob(os.path.join(CKPT_DIR, "*.pt")): os.utime(f, (week_ago, week_ago))
        clean_up(CKPT_DIR)
        print(f"rank 0: after the clean-up: {sorted(os.path.basename(f) for f in glob.glob(os.path.join(CKPT_DIR, '*.pt')))}", flush=True)
    dist.barrier()
    last = newest(CKPT_DIR)  # the next restart of the job, as it will resume
    start = torch.load(last, weights_only=True)["step"] if last else 0
    print(f"rank {rank}: a restart would resume at step {start} of {STEPS}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
