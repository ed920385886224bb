"""DataLoader workers in a container whose /dev/shm is small: the batches in flight do not fit.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
The small /dev/shm is the machine's, not the script's: `distlab run shm-too-small` gives each rank a private 14 MiB
one (DISTLAB_SHM_MIB=14, as `docker run --shm-size=14m` would; mounting it needs root).
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset

STEPS, BATCH, SAMPLE_MIB = 8, 4, 1  # batches of 4 samples of 1 MiB: 4 MiB a batch


class Images(Dataset):
    "Image-sized samples (1 MiB of float32 each) with a label."
    def __len__(self): return STEPS * BATCH
    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(SAMPLE_MIB << 18, generator=g), i % 2


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(0)
    model = DDP(nn.Linear(256, 2).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    # each worker hands its batches to this rank through files in /dev/shm, prefetch_factor of them in flight
    loader = DataLoader(Images(), batch_size=BATCH, num_workers=2, prefetch_factor=2)  # BUG: 2 workers x 2 batches x 4 MiB = 16 MiB in /dev/shm at once
    step = 0
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x.to(device).view(len(x), -1, 256).mean(1)), y.to(device))
        opt.zero_grad()
        loss.backward()  # DDP's gradient all-reduce
        opt.step()
        step += 1
    print(f"rank {rank}: {step} steps, last loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
