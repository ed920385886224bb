"""Preemption: the platform sends SIGTERM, waits a grace period, then kills; torchrun restarts the job.

Run it on 2 ranks, restarted once:  distlab launch --nproc-per-node 2 --max-restarts 1 broken.py
"""
import os
import signal
import sys
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, SAVE_EVERY, NOTICE_AT = 20, 5, 13
CKPT = os.path.join(os.environ.get("DISTLAB_RUN_DIR", "."), "checkpoints", "latest.pt")  # one directory per distlab run


def batch(step, rank):
    g = torch.Generator().manual_seed(step * 100 + rank)  # this step's batch: the same in every restart
    return torch.randn(16, 32, generator=g), torch.randint(0, 4, (16,), generator=g)


def train(rank, device, start=0, tag="", on_step=None):
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    if start:
        state = torch.load(CKPT, map_location=device, weights_only=True)
        model.module.load_state_dict(state["model"]); opt.load_state_dict(state["optimizer"])
    for step in range(start, STEPS):
        x, y = batch(step, rank)
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"rank {rank}{tag}: step {step} loss {loss.item()!r}", flush=True)
        if on_step: on_step(step + 1, {"model": model.module.state_dict(), "optimizer": opt.state_dict(), "step": step + 1})


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0))  # torchrun counts its restarts of the job

    notice = []
    signal.signal(signal.SIGTERM, lambda *_: notice.append(1))  # FIX: the handler only takes note; the loop decides

    def after_step(done, state):
        if restart == 0 and rank == world - 1 and done == NOTICE_AT:
            os.kill(os.getpid(), signal.SIGTERM)  # EMULATION: the platform's preemption notice reaches one rank
        stop = torch.tensor([float(bool(notice))], device=device)
        dist.all_reduce(stop)  # FIX: a notice to any rank stops every rank, at the same step
        if stop.item() or done % SAVE_EVERY == 0:
            if rank == 0: torch.save(state, CKPT + ".tmp"); os.replace(CKPT + ".tmp", CKPT)
            dist.barrier()
        if stop.item():
            print(f"rank {rank}: SIGTERM; saved step {done}, exiting for a restart", flush=True)
            sys.exit(143)  # FIX: non-zero, so torchrun restarts the job (exit 0 would tell it the job is finished)

    os.makedirs(os.path.dirname(CKPT), exist_ok=True)
    start = torch.load(CKPT, weights_only=True)["step"] if os.path.exists(CKPT) else 0
    print(f"rank {rank} restart {restart}: starting at step {start}", flush=True)
    train(rank, device, start, f" restart {restart}", after_step)
    print(f"rank {rank}: finished at step {STEPS}", flush=True)
    train(rank, device, tag=" uninterrupted")  # the same job never interrupted, to compare the losses with
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
