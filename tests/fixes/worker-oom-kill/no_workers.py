"""DataLoader workers killed by the kernel: a rank and its workers in a container with a memory limit.

Each rank trains a small image classifier. Its Dataset reads a shard index (the offset of every image in
the shard files: 16 million int64, 128 MiB) the first time a worker asks it for an image, so every
DataLoader worker holds an index of its own; the images (3x128x128 float32) come in batches of 64.
The rank runs in a container with a memory limit: under distlab, rank 1 and its workers share a cgroup v1
memory limit (`distlab run worker-oom-kill` makes it; a bare torchrun has none).
Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

IMAGES, SIZE, CLASSES, INDEX_ENTRIES = 4096, 128, 10, 16 * 2**20
BATCH, STEPS = 64, 8
WORKERS, PREFETCH = 0, None  # the loading in the rank itself: one index, one batch at a time


class Shards(Dataset):
    def __init__(self):
        self.index = None  # read lazily: in each worker, the first time it is asked for an image

    def __len__(self): return IMAGES

    def __getitem__(self, i):
        if self.index is None:
            self.index = torch.arange(INDEX_ENTRIES, dtype=torch.int64) * 4096  # the shard index: 128 MiB, a copy per worker
        pixel = int(self.index[i]) % 251 / 251  # "decode" image i from where the index says it is (a flat colour here: decoding is cheap)
        return torch.full((3, SIZE, SIZE), pixel), i % CLASSES


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    data = Shards()
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=BATCH, sampler=sampler, num_workers=WORKERS, prefetch_factor=PREFETCH)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.AvgPool2d(8), nn.Flatten(), nn.Linear(3 * 16 * 16, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                              nn.Linear(2048, CLASSES)).to(device))  # a step slower than a worker's batch: the prefetch queue fills
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, (images, labels) in zip(range(STEPS), loader):
        loss = nn.functional.cross_entropy(model(images.to(device)), labels.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 4 == 3: print(f"rank {rank}: step {step + 1} loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
