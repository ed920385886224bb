"""A metric summed over ranks, built on the CPU: DDP trains on each rank's GPU under NCCL, and at the end of every
epoch each rank adds its count of correct predictions to every other rank's with `dist.all_reduce`, to print the
accuracy of the whole job.

It needs a CUDA GPU per rank. On one GPU:  distlab launch --nproc-per-node 1 broken.py   (bare: torchrun --nproc-per-node 1 broken.py)
On N GPUs: --nproc-per-node N.
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

EPOCHS, STEPS, BATCH = 2, 4, 64


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)  # the same starting weights on every rank
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2)).to(device), device_ids=[local_rank])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)  # each rank its own synthetic samples
    for epoch in range(EPOCHS):
        correct = 0
        for step in range(STEPS):
            x = torch.randn(BATCH, 32, generator=g).to(device)
            y = (x[:, 0] + x[:, 1] > 0).long()  # a rule the model can learn
            out = model(x)
            loss = nn.functional.cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()  # DDP's gradient all-reduce, on the GPU
            opt.step()
            correct += (out.argmax(1) == y).sum().item()
        counts = torch.tensor([correct, STEPS * BATCH], device=device)  # FIX: on this rank's GPU, where NCCL can reduce it
        dist.all_reduce(counts)  # the sums over every rank: correct predictions, samples seen
        right, seen = counts.tolist()
        print(f"rank {rank}: epoch {epoch}: {right} of {seen} correct on {world} ranks, accuracy {right / seen:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
