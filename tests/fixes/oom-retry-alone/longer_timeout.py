"""Out of memory on one rank: it skips the step and halves its micro-batch, alone.

Rank 1 runs on a smaller card than rank 0. On CPU, `SmallCard` stands in for it: the activations a forward
keeps for backward may total `mib` MiB, past that the forward raises torch.OutOfMemoryError, as a full GPU does.
Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os
from datetime import timedelta
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
    dist.init_process_group("nccl" if cuda else "gloo", timeout=timedelta(hours=2))  # my fix: give the slow rank time to catch up
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
        opt.zero_grad()
        try:
            chunks = list(zip(x.split(micro), y.split(micro)))  # the batch in micro-batches of `micro` samples
            for i, (xs, ys) in enumerate(chunks):
                with model.no_sync() if i < len(chunks) - 1 else nullcontext():  # one all-reduce per step, after the last micro-batch
                    loss = nn.functional.cross_entropy(card.forward(model, xs), ys) * len(xs) / BATCH
                    loss.backward()  # DDP all-reduces the gradients here (outside no_sync)
        except torch.OutOfMemoryError as e:
            micro //= 2  # BUG: only this rank backs off, and it drops this step: its peers wait in this step's all-reduce
            print(f"rank {rank}: {e}; skipping step {step}, micro-batches of {micro} from now on", flush=True)
            continue
        opt.step()
        print(f"rank {rank}: step {step} done (micro-batch {micro})", flush=True)
    dist.barrier()  # the end of training: everyone waits here before rank 0 would save
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
