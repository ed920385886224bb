"""Memory that grows every step: a running metric kept as tensors.

Each step trains on a batch, then scores a fixed probe batch for a running "confidence" metric and keeps the score.
Run it on 2 ranks:  DISTLAB_MEMORY_STEPS=1 distlab launch --nproc-per-node 2 broken.py
(DISTLAB_MEMORY_STEPS=1 records each rank's memory after every optimizer step; bare torchrun runs it too.)
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

FIELDS, VOCAB, WIDTH, BLOCKS, CLASSES = 4, 2048, 64, 4, 10
BATCH, PROBE, STEPS = 1024, 4096, 14


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
    probe = torch.randint(0, VOCAB, (PROBE, FIELDS), generator=torch.Generator().manual_seed(rank)).to(device)
    scores = []
    for step in range(STEPS):
        g = torch.Generator().manual_seed(1000 * step + rank)
        x = torch.randint(0, VOCAB, (BATCH, FIELDS), generator=g).to(device)
        y = torch.randint(0, CLASSES, (BATCH,), generator=g).to(device)
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        with torch.no_grad():  # FIX: no graph is recorded for the metric
            scores.append(model.module(probe).softmax(-1).amax(-1).mean().item())  # FIX: keep a float, not a tensor
        print(f"rank {rank}: step {step} loss {loss.item():.4f} confidence {sum(float(s) for s in scores) / len(scores):.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
