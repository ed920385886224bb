"""A preemption-safe DDP training script: run it with `torchrun --max-restarts=3 --nproc-per-node=2 examples/preemptible_train.py`.

Kill a rank (SIGKILL), or send it SIGTERM, at any moment: torchrun restarts the ranks, they load the newest valid
checkpoint and continue; the losses are the ones the uninterrupted run would have printed, bit for bit (on CPU).
With gloo and --max-restarts, set TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (distlab's launcher does).
"""
import argparse, os
import torch, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import BatchSampler, TensorDataset

from distlab.train.checkpoint import CheckpointDir, save_on_rank0
from distlab.train.resume import ResumableSampler, PreemptionHandler, capture_training_state, restore_training_state


def train(steps: int, ckpt: CheckpointDir | None, save_every: int, pre: PreemptionHandler | None, tag: str) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(0)
    ds = TensorDataset(torch.randn(512, 32, generator=g), torch.randint(0, 4, (512,), generator=g))
    sampler = ResumableSampler(ds, world, rank, shuffle=True, seed=0, drop_last=True)
    batch, per_epoch = 16, len(sampler) // 16
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 4)))
    torch.manual_seed(1234 + rank)  # per-rank stream: dropout and input noise differ per rank
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.8)
    step = 0
    if ckpt is not None:
        state, report = ckpt.load_latest()  # newest checkpoint whose checksum verifies; says what it skipped
        if state is not None: step = restore_training_state(state, model, opt, scheduler=sched)["step"]
        if rank == 0 and (state is not None or report.skipped): print(f"resume: {report.text()}", flush=True)
    while step < steps:
        epoch, b = divmod(step, per_epoch)
        sampler.set_epoch(epoch, skip=b * batch)  # shuffle of this epoch, minus the batches already trained
        for idx in BatchSampler(sampler, batch, drop_last=True):
            x, y = ds[idx]
            loss = nn.functional.cross_entropy(model(x + 0.05 * torch.randn_like(x)), y)
            opt.zero_grad(); loss.backward(); opt.step(); sched.step()
            step += 1
            print(f"{tag} step {step} loss {loss.item()!r}", flush=True)
            stop = pre is not None and pre.should_stop()  # every rank learns that one got SIGTERM
            if ckpt is not None and (stop or step % save_every == 0 or step == steps):
                save_on_rank0(capture_training_state(model, opt, scheduler=sched, step=step, epoch=step // per_epoch,
                                                     batch_in_epoch=step % per_epoch), ckpt, step)
            if stop: pre.exit()  # non-zero: torchrun restarts the job, which resumes from the save just made
            if step == steps: break


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ckpt-dir", required=True, help="where checkpoints go (shared by all ranks)")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--save-every", type=int, default=5)
    ap.add_argument("--keep", type=int, default=2, help="checkpoints to keep")
    ap.add_argument("--reference", action="store_true", help="afterwards, train again uninterrupted and print its losses (tag 'reference')")
    a = ap.parse_args()
    dist.init_process_group("gloo")
    try:
        pre = PreemptionHandler(grace_s=30).install()  # SIGTERM sets a flag; the loop saves and exits at the next step
        train(a.steps, CheckpointDir(a.ckpt_dir, keep=a.keep), a.save_every, pre, "train")
        if a.reference: train(a.steps, None, a.save_every, None, "reference")
    finally:
        if dist.is_initialized(): dist.destroy_process_group()


if __name__ == "__main__":
    main()
