"""Torn write: the machine dies in the middle of a save, and the restarted job finds half a checkpoint.

Run it on 2 ranks, restarted once:  distlab launch --nproc-per-node 2 --max-restarts 1 broken.py
"""
import os
import signal
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, SAVE_EVERY, DIES_AT = 16, 4, 12
CKPT = os.path.join(os.environ.get("DISTLAB_RUN_DIR", "."), "checkpoints", "latest.pt")  # one directory per distlab run


class DiesMidWrite:
    "EMULATION: the machine dies (OOM killer, power, spot reclaim) once 4 KiB of a save have reached the file."
    def __init__(self, f): self.f, self.left = f, 4096
    def write(self, b):
        if len(b) >= self.left:
            self.f.write(bytes(b)[:self.left]); self.f.flush(); os.kill(os.getpid(), signal.SIGKILL)
        self.left -= len(b)
        return self.f.write(b)


def save(state, path, dies=False):
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:  # FIX: write beside the checkpoint; the old one stays whole
        torch.save(state, DiesMidWrite(f) if dies else f)
        f.flush(); os.fsync(f.fileno())  # FIX: the new bytes are on the disk before the name moves
    os.replace(tmp, path)  # FIX: an atomic rename: the name points at the old file or the new one, never at half of one


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, device = dist.get_rank(), torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0))  # torchrun counts its restarts of the job
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    start = 0
    if os.path.exists(CKPT):  # a restart: continue from the checkpoint
        state = torch.load(CKPT, map_location=device, weights_only=True)
        model.module.load_state_dict(state["model"]); opt.load_state_dict(state["optimizer"]); start = state["step"]
    print(f"rank {rank} restart {restart}: starting at step {start}", flush=True)
    os.makedirs(os.path.dirname(CKPT), exist_ok=True)
    for step in range(start, STEPS):
        g = torch.Generator().manual_seed(step * 100 + rank)  # this step's batch, the same in every restart
        x, y = torch.randn(16, 32, generator=g), torch.randint(0, 4, (16,), generator=g)
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad(); loss.backward(); opt.step()
        if (step + 1) % SAVE_EVERY == 0:
            if rank == 0:
                dies = restart == 0 and step + 1 == DIES_AT
                save({"model": model.module.state_dict(), "optimizer": opt.state_dict(), "step": step + 1}, CKPT, dies)
                print(f"rank 0: saved step {step + 1} ({os.path.getsize(CKPT)} bytes)", flush=True)
            dist.barrier()  # nobody reads the checkpoint before it is written
    print(f"rank {rank}: finished at step {STEPS}, loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
