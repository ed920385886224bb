"""Resume drift: a job stopped at step 10 and resumed from its checkpoint, against the same job never stopped.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DistributedSampler, TensorDataset

STEPS, STOP_AT, BATCH = 24, 10, 16
CKPT = os.path.join(os.environ.get("DISTLAB_RUN_DIR", "."), "checkpoints", "latest.pt")  # one directory per distlab run


def life(rank, device, stop_at=STEPS):
    "One process's life: everything built fresh, resumed from CKPT when there is one, trained to `stop_at`."
    torch.manual_seed(1000 + rank)  # a new process: each rank's random stream (dropout) starts from its seed
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(512, 32, generator=g), torch.randint(0, 4, (512,), generator=g))
    sampler = DistributedSampler(data, shuffle=True, seed=0, drop_last=True)  # shuffled anew each epoch: set_epoch
    per_epoch = len(sampler) // BATCH
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 4)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.8)
    step = 0
    if os.path.exists(CKPT):
        state = torch.load(CKPT, map_location=device, weights_only=True)
        model.module.load_state_dict(state["model"]); opt.load_state_dict(state["optimizer"]); step = state["step"]
        sched.load_state_dict(state["scheduler"])  # FIX: the learning rate where it was
        torch.set_rng_state(state["rng"][rank])  # FIX: this rank's random stream where it was
    epoch, skip = divmod(step, per_epoch)  # FIX: the data where it was: this epoch's shuffle, after the batches done
    losses = []
    while step < stop_at:
        sampler.set_epoch(epoch)
        order = list(sampler)
        for b in range(skip, per_epoch):
            x, y = data[order[b * BATCH:(b + 1) * BATCH]]
            loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
            opt.zero_grad(); loss.backward(); opt.step(); sched.step()
            losses.append(loss.item()); step += 1
            if step == stop_at: break
        epoch, skip = epoch + 1, 0
    if stop_at < STEPS:
        streams = [None] * dist.get_world_size()
        dist.all_gather_object(streams, torch.get_rng_state())  # FIX: every rank's random stream
        state = {"model": model.module.state_dict(), "optimizer": opt.state_dict(), "step": step,
                 "scheduler": sched.state_dict(), "rng": dict(enumerate(streams))}  # FIX: all that a resume needs
        if rank == 0: torch.save(state, CKPT)
        dist.barrier()
    return losses


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, device = dist.get_rank(), torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")
    os.makedirs(os.path.dirname(CKPT), exist_ok=True)
    reference = life(rank, device)  # the job, never stopped
    resumed = life(rank, device, STOP_AT) + life(rank, device)  # stopped at step 10, then resumed from its checkpoint
    print(f"rank {rank}: uninterrupted {reference}", flush=True)
    print(f"rank {rank}: resumed at step {STOP_AT} {resumed}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
