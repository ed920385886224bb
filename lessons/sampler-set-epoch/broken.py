"""Training for several epochs on a dataset sharded across 2 ranks.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

BATCH, EPOCHS, SAMPLES = 16, 3, 256


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(0)
    x = torch.randn(SAMPLES, 32)
    y = (x @ torch.randn(32, 4)).argmax(1)
    data = TensorDataset(x, y, torch.arange(SAMPLES))  # the third column: each sample's index, to log what was read
    sampler = DistributedSampler(data, shuffle=True)  # each rank gets its own 1/world of the samples, shuffled
    loader = DataLoader(data, batch_size=BATCH, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 4)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(EPOCHS):
        # BUG: sampler.set_epoch(epoch) is never called: the sampler shuffles with seed + 0, the same order every epoch
        seen, steps = [], 0
        for xb, yb, idx in loader:
            loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
            opt.zero_grad()
            loss.backward()  # DDP averages the gradients of the ranks' batches
            opt.step()
            seen += idx.tolist()
            steps += 1
        print(f"rank {rank}: epoch {epoch} loss {loss.item():.3f}, {steps} steps, samples read: {' '.join(map(str, seen))}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
