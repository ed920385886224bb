"""Out of memory on one rank: it skips the step and halves its micro-batch, alone.

Rank 1 runs on a smaller card than rank 0. On CPU, `SmallCard` stands in for it: the activations a forward
keeps for backward may total `mib` MiB, past that the forward raises torch.OutOfMemoryError, as a full GPU does.
Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os
from contextlib import nullcontext
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

BATCH, STEPS = 1024, 6
CARD_MIB = {0: 16, 1: 3}  # a full batch keeps about 4.3 MiB of activations, half a batch 2.2


class SmallCard:
    "Count the bytes a forward keeps for backward; past the card's size, fail as a full GPU does."
    def __init__(self, mib): self.limit, self.kept = mib << 20, 0
    def keep(self, t):
        self.kept += t.numel() * t.element_size()
        if self.kept > self.limit:
            raise torch.OutOfMemoryError(f"out of memory: tried to keep {self.kept / 2**20:.1f} MiB of activations on a {self.limit >> 20} MiB card")
        return t
    def forward(self, model, x):
        self.kept = 0
        with torch.autograd.graph.saved_tensors_hooks(self.keep, lambda t: t):
            return model(x)


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")
    card = SmallCard(CARD_MIB[rank % 2])

    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 4)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    micro = BATCH
    for step in range(STEPS):
        g = torch.Generator().manual_seed(step * world + rank)
        x, y = torch.randn(BATCH, 64, generator=g).to(device), torch.randint(0, 4, (BATCH,), generator=g).to(device)
        while True:  # FIX: try a micro-batch with no all-reduce in it, then agree, then back off together
            ran_out = 0.0
            try:
                with model.no_sync():  # FIX: no collective inside the try: a failure leaves nothing half-joined
                    nn.functional.cross_entropy(card.forward(model, x[:micro]), y[:micro]).backward()
            except torch.OutOfMemoryError as e:
                ran_out = 1.0
                print(f"rank {rank}: {e}", flush=True)
            flag = torch.tensor([ran_out], device=device)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)  # FIX: every rank learns whether any rank ran out
            if flag.item() == 0: break
            micro //= 2  # FIX: all ranks halve together
            print(f"rank {rank}: a rank ran out of memory; every rank now uses micro-batches of {micro}", flush=True)
        opt.zero_grad()  # the trial's gradients are dropped
        chunks = list(zip(x.split(micro), y.split(micro)))  # the batch in micro-batches of `micro` samples
        for i, (xs, ys) in enumerate(chunks):
            with model.no_sync() if i < len(chunks) - 1 else nullcontext():  # one all-reduce per step, after the last micro-batch
                loss = nn.functional.cross_entropy(card.forward(model, xs), ys) * len(xs) / BATCH
                loss.backward()  # DDP all-reduces the gradients here (outside no_sync)
        opt.step()
        print(f"rank {rank}: step {step} done (micro-batch {micro})", flush=True)
    dist.barrier()  # the end of training: everyone waits here before rank 0 would save
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
