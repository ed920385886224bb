"""Uneven memory: one job on a bigger and a smaller card, the same micro-batch on both.

The model and batch of the `oom` lesson. On CPU ranks the launch gives each rank its own budget, as two cards of
different sizes would: rank 0 the bigger one, rank 1 the smaller.
Run it on 2 ranks:  DISTLAB_MEMORY_BUDGET_MIB=230,176 distlab launch --nproc-per-node 2 broken.py
"""
import os
from contextlib import nullcontext
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

FIELDS, VOCAB, WIDTH, BLOCKS, CLASSES = 4, 24576, 64, 8, 10
BATCH, STEPS = 32768, 3


class FieldsMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.tables = nn.ModuleList(nn.Embedding(VOCAB, WIDTH) for _ in range(FIELDS))
        self.blocks = nn.Sequential(*(nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU()) for _ in range(BLOCKS)))
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, tokens):  # tokens: (batch, FIELDS) integers
        x = sum(table(tokens[:, i]) for i, table in enumerate(self.tables))
        return self.head(self.blocks(x))


def batch(rank, step, device):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return (torch.randint(0, VOCAB, (BATCH, FIELDS), generator=g).to(device),
            torch.randint(0, CLASSES, (BATCH,), generator=g).to(device))


def train_step(model, opt, x, y, micro):
    "One optimizer step over the batch in micro-batches of `micro`; with DDP, one all-reduce, after the last."
    opt.zero_grad(set_to_none=True)
    chunks = list(zip(x.split(micro), y.split(micro)))
    for i, (xs, ys) in enumerate(chunks):
        with model.no_sync() if i < len(chunks) - 1 else nullcontext():
            loss = nn.functional.cross_entropy(model(xs), ys)
            (loss * len(xs) / BATCH).backward()  # each share scaled: the summed gradient is the batch mean
    opt.step()
    return loss


def fitting_micro_batch(rank, device):
    "FIX: the largest micro-batch this rank's own memory holds, found with a throwaway copy of the model."
    micro = BATCH
    while True:
        trial = spare = None
        try:
            trial = FieldsMLP().to(device)  # FIX: no DDP in the trial, so a failure leaves no collective half-done
            spare = [torch.empty_like(p) for p in trial.parameters() for _ in range(3)]  # FIX: Adam's two moments, DDP's gradient copy
            x, y = batch(rank, 0, device)
            for xs, ys in zip(x.split(micro), y.split(micro)):
                (nn.functional.cross_entropy(trial(xs), ys) * len(xs) / BATCH).backward()
            return micro
        except (torch.OutOfMemoryError, RuntimeError) as e:  # a GPU raises OutOfMemoryError, the CPU allocator a RuntimeError
            if "out of memory" not in str(e) and "can't allocate memory" not in str(e): raise
            if micro == 1: raise
            micro //= 2  # FIX: halve on this rank only; the other ranks keep theirs
        finally:
            trial = spare = None


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    micro = fitting_micro_batch(rank, device)  # FIX: each rank sizes its micro-batch to its own card
    print(f"rank {rank}: micro-batch {micro} ({BATCH // micro} passes per step)", flush=True)
    torch.manual_seed(0)
    model = DDP(FieldsMLP().to(device))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(STEPS):
        loss = train_step(model, opt, *batch(rank, step, device), micro)  # FIX: every rank still steps on its whole batch
        print(f"rank {rank}: step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
