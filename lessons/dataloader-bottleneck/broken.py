"""DataLoader bottleneck: every sample is read from storage by the training process itself.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
The samples are files in $DATA_DIR (written to a temporary folder when it is unset). In the lesson $DATA_DIR
is a volume whose reads the kernel throttles (`distlab show dataloader-bottleneck`).
"""
import os, tempfile, time
from pathlib import Path
import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

BATCH, STEPS, FEATURES, SAMPLES = 64, 30, 4096, 4096


class Files(Dataset):
    "One sample per file, as many image datasets lie on disk: FEATURES float32, the label in the name."
    def __init__(self, folder): self.paths = sorted(Path(folder).glob("*.bin"))
    def __len__(self): return len(self.paths)
    def __getitem__(self, i):
        x = torch.from_numpy(np.fromfile(self.paths[i], dtype=np.float32))  # the read: from storage, each time
        return (x - x.mean()) / (x.std() + 1e-6), int(self.paths[i].stem.split("_")[1])  # the decode


def data_folder(rank):
    folder = os.environ.get("DATA_DIR")
    if folder is None:  # run alone: write the samples once, on rank 0
        folder = os.path.join(tempfile.gettempdir(), f"distlab-dataloader-{SAMPLES}")
        if rank == 0 and not os.path.isdir(folder):
            os.makedirs(folder)
            xs = np.random.default_rng(0).standard_normal((SAMPLES, FEATURES), dtype=np.float32)
            for i in range(SAMPLES): xs[i].tofile(os.path.join(folder, f"{i:05d}_{i % 10}.bin"))
        dist.barrier()
    return folder


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")  # rank and world size come from torchrun
    rank = dist.get_rank()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    data = Files(data_folder(rank))
    loader = DataLoader(data, batch_size=BATCH, sampler=DistributedSampler(data, shuffle=False),
                        num_workers=0)  # BUG: the training loop itself reads every file, and waits for each
    model = DDP(nn.Sequential(nn.Linear(FEATURES, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    waited, steps, t = 0.0, 0, time.perf_counter()
    for x, y in loader:
        if steps == 2: waited, start = 0.0, t  # timing from step 2: the first steps build DDP's buckets
        waited += time.perf_counter() - t  # how long this step waited for its batch
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
        t = time.perf_counter()
        if steps == STEPS: break
    print(f"rank {rank}: {steps} steps; waited {waited:.3f} s for data in {t - start:.3f} s of training", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
