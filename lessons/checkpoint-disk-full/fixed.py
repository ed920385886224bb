"""Disk full: the checkpoint disk runs out of space in the middle of a save.

Run it on 2 ranks, as root (it mounts a small disk):  distlab launch --nproc-per-node 2 broken.py
"""
import ctypes
import os
import shutil
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, SAVE_EVERY = 8, 4
CKPT_DIR = os.path.join(os.environ.get("DISTLAB_RUN_DIR", "."), "checkpoints")  # one directory per distlab run
CKPT = os.path.join(CKPT_DIR, "latest.pt")


def small_disk(path, size="2560k"):
    "EMULATION: a nearly full disk: a 2.5 MiB tmpfs at `path` in this process's own mount namespace (gone when it ends)."
    libc = ctypes.CDLL(None, use_errno=True)
    for call in (lambda: libc.unshare(0x20000),  # a mount namespace of its own: nobody else sees this disk
                 lambda: libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None),  # its mounts stay private
                 lambda: libc.mount(b"tmpfs", path.encode(), b"tmpfs", 0, f"size={size}".encode())):
        if call() != 0: raise PermissionError(f"no small disk at {path}: {os.strerror(ctypes.get_errno())} (run as root)")


def save(state, path):
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "wb") as f:  # FIX: write beside the checkpoint; the previous one stays whole
            torch.save(state, f)
            f.flush(); os.fsync(f.fileno())  # FIX: the bytes are on the disk before the name moves
    except Exception:
        os.remove(tmp)  # FIX: give the space back, and say what is still there
        print(f"rank 0: {shutil.disk_usage(os.path.dirname(path)).free} bytes free on the disk; "
              f"{os.path.basename(path)} is untouched and still loads", flush=True)
        raise
    os.replace(tmp, path)  # FIX: an atomic rename: the old checkpoint or the new one, never half of one


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, device = dist.get_rank(), torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256)).to(device))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)  # two moments per weight, from its first step on
    state = lambda step: {"model": model.module.state_dict(), "optimizer": opt.state_dict(), "step": step}
    if rank == 0:
        os.makedirs(CKPT_DIR, exist_ok=True)
        small_disk(CKPT_DIR)
        save(state(0), CKPT)  # a first checkpoint, so that a crash early on has somewhere to go back to
        print(f"rank 0: saved step 0 ({os.path.getsize(CKPT)} bytes)", flush=True)
    for step in range(STEPS):
        x = torch.randn(32, 256, device=device)
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        if (step + 1) % SAVE_EVERY == 0:
            if rank == 0:
                try:
                    save(state(step + 1), CKPT)
                    print(f"rank 0: saved step {step + 1}", flush=True)
                except Exception as e:  # a failed save should not end a training run
                    print(f"rank 0: the save of step {step + 1} failed: {e}; training goes on", flush=True)
            dist.barrier()
    if rank == 0:  # the job's last checkpoint, as the next job (or an evaluation) will load it
        last = torch.load(CKPT, map_location="cpu", weights_only=True)
        print(f"rank 0: {os.path.basename(CKPT)} loads: step {last['step']}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
