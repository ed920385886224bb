"""Out of memory: the whole batch in one forward and backward does not fit.

A recommender-style model: four embedding tables summed into a 64-wide vector, eight Linear+ReLU blocks, a
classifier; DDP and Adam; a batch of 32768 samples per rank. On CPU ranks the launch gives each rank a memory
budget, as a GPU has a size: past it, torch's own allocator fails ("DefaultCPUAllocator: can't allocate memory").
Run it on 2 ranks:  DISTLAB_MEMORY_BUDGET_MIB=176 distlab launch --nproc-per-node 2 broken.py
(bare torchrun has no budget: on a large machine it fits.)
This fix needs a CUDA GPU (offloading to host memory means nothing on CPU ranks); on one GPU with a budget:
DISTLAB_GPU_MEMORY_BUDGET_MIB=290 distlab launch --nproc-per-node 1 fixed-offload.py
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

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
    dist.init_process_group("nccl")  # FIX needs a GPU: the weights live in host memory and visit the GPU to compute
    rank = dist.get_rank()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}")

    torch.manual_seed(0)
    model = FieldsMLP()  # built in host memory: fully_shard below keeps it there
    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    offload = CPUOffloadPolicy()  # FIX: weights, gradients and Adam state stay in (pinned) host memory
    for part in [*model.tables, *model.blocks]:
        fully_shard(part, mesh=mesh, offload_policy=offload)  # FIX: a part's weights are copied to the GPU only while it runs
    fully_shard(model, mesh=mesh, offload_policy=offload)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)  # FIX: steps on the CPU, where the state is
    for step in range(STEPS):
        g = torch.Generator().manual_seed(1000 * step + rank)
        x = torch.randint(0, VOCAB, (BATCH, FIELDS), generator=g).to(device)
        y = torch.randint(0, CLASSES, (BATCH,), generator=g).to(device)
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        print(f"rank {rank}: step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
