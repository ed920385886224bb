"""A DataLoader worker stuck in a read: every file in the data directory is taken for a sample.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os, shutil, signal, tempfile
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

SAMPLES, BATCH, WORKERS = 64, 8, 2


def make_storage(n: int) -> str:
    "A data directory: one file per sample, and a named pipe that a streaming tool left there and no longer writes."
    root = tempfile.mkdtemp(prefix="samples-")
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(n, 32, generator=g), torch.randint(0, 4, (n,), generator=g)
    for i in range(n):
        with open(os.path.join(root, f"{i:05d}.bin"), "wb") as f: f.write(x[i].numpy().tobytes() + bytes([int(y[i])]))
    os.mkfifo(os.path.join(root, "00000.bin.incoming"))  # opening it for reading waits for a writer, forever
    return root


class Files(Dataset):
    def __init__(self, root: str):
        self.paths = sorted(e.path for e in os.scandir(root))  # BUG: every entry, whatever it is

    def __len__(self): return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f: raw = f.read()  # waits until the storage answers
        return torch.frombuffer(bytearray(raw[:-1]), dtype=torch.float32), raw[-1]


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    root = make_storage(SAMPLES)  # removed at the end, and when torchrun stops this rank (SIGTERM)
    signal.signal(signal.SIGTERM, lambda *_: (shutil.rmtree(root, ignore_errors=True), os._exit(143)))
    try: train(Files(root), rank, device)
    finally: shutil.rmtree(root, ignore_errors=True)
    dist.destroy_process_group()


def train(data, rank, device):
    sampler = DistributedSampler(data, shuffle=False, drop_last=True)
    loader = DataLoader(data, batch_size=BATCH, sampler=sampler, num_workers=WORKERS)
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


if __name__ == "__main__":
    main()
