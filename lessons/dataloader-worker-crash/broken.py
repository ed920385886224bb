"""DataLoader worker crash: samples are stored encoded and decoded by the DataLoader's worker processes.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import ctypes, os, struct
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

SAMPLES, BATCH, WORKERS, CORRUPT = 64, 8, 2, 1  # sample 1 is a damaged file: the last rank's first batch
MAGIC = b"SMPL"


class Records(Dataset):
    "Samples as encoded records: a header (magic, offset of the payload) and 32 floats, decoded when loaded."
    def __init__(self, n: int):
        g = torch.Generator().manual_seed(0)
        rows, labels = torch.randn(n, 32, generator=g), torch.randint(0, 4, (n,), generator=g)
        self.records = [MAGIC + struct.pack("<QB", 13, int(c)) + r.numpy().tobytes() for r, c in zip(rows, labels)]
        self.records[CORRUPT] = b"\x89PNG" + struct.pack("<QB", 2**46, 0) + bytes(128)  # a damaged file: garbage header

    def __len__(self): return len(self.records)

    def header_ok(self, i: int) -> bool:
        "The cheap check: the magic and the offset, without decoding the payload."
        magic, offset, _ = struct.unpack("<4sQB", self.records[i][:13])
        return magic == MAGIC and offset == 13

    def __getitem__(self, i):
        rec = self.records[i]
        offset, label = struct.unpack("<QB", rec[4:13])
        base = ctypes.cast(rec, ctypes.c_void_p).value  # where the record's bytes are in memory
        payload = ctypes.string_at(base + offset, 32 * 4)  # a native decoder trusts the header's offset: garbage reads unmapped memory
        return torch.frombuffer(bytearray(payload), dtype=torch.float32), label


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    data = Records(SAMPLES)  # BUG: the damaged record stays in; decoding it crashes the worker process
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
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
