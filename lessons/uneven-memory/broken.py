"""Uneven memory: one job on a bigger and a smaller card, the same micro-batch on both.

The model and batch of the `oom` lesson. On CPU ranks the launch gives each rank its own budget, as two cards of
different sizes would: rank 0 the bigger one, rank 1 the smaller.
Run it on 2 ranks:  DISTLAB_MEMORY_BUDGET_MIB=230,176 distlab launch --nproc-per-node 2 broken.py
"""
import os
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


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(0)
    model = DDP(FieldsMLP().to(device))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(STEPS):
        g = torch.Generator().manual_seed(1000 * step + rank)
        x = torch.randint(0, VOCAB, (BATCH, FIELDS), generator=g).to(device)
        y = torch.randint(0, CLASSES, (BATCH,), generator=g).to(device)
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)  # BUG: every rank takes the whole batch at once, whatever its card can hold
        loss.backward()
        opt.step()
        print(f"rank {rank}: step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
