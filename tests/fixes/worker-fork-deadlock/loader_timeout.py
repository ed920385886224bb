"""DataLoader workers after fork: the dataset reads ahead with a background thread, and rank 0 looks at a sample first.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os
from concurrent.futures import ThreadPoolExecutor
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

SAMPLES, BATCH, WORKERS = 64, 8, 2


class ReadAhead(Dataset):
    "Samples read by a background thread (on real storage the read of sample i+1 overlaps the decoding of sample i)."
    def __init__(self, n: int):
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(n, 32, generator=g), torch.randint(0, 4, (n,), generator=g)
        self.reader = ThreadPoolExecutor(max_workers=1)  # its thread starts at the first read

    def _read(self, i: int):
        return self.x[i].clone(), int(self.y[i])  # a file read, in a real dataset

    def __len__(self): return len(self.x)

    def __getitem__(self, i):
        return self.reader.submit(self._read, i).result()  # waits for the reader thread


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    data = ReadAhead(SAMPLES)
    if rank == 0: print(f"{len(data)} samples, the first one: {tuple(data[0][0].shape)}", flush=True)
    sampler = DistributedSampler(data, shuffle=False, drop_last=True)
    loader = DataLoader(data, batch_size=BATCH, sampler=sampler, num_workers=WORKERS, timeout=5)  # a stuck batch raises after 5 s
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = 0
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()  # DDP's gradient all-reduce: every rank, every step
        opt.step()
        steps += 1
    print(f"rank {rank}: {steps} steps, last loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
