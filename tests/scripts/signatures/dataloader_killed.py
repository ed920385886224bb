"""A DataLoader worker dies from a signal while fetching a batch: SIGKILL stands for the kernel's OOM killer,
SIGBUS for a worker that ran out of shared memory (/dev/shm) while sending a batch back."""
import os, signal, sys, torch, torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

SIG = getattr(signal, "SIG" + (sys.argv[1] if len(sys.argv) > 1 else "KILL"))

class Doomed(Dataset):
    def __len__(self): return 64
    def __getitem__(self, i):
        if i == 9: os.kill(os.getpid(), SIG)
        return torch.full((4,), float(i))

def main():
    dist.init_process_group("gloo")
    try:
        rank = dist.get_rank()
        for step, batch in enumerate(DataLoader(Doomed(), batch_size=4, num_workers=1)):
            print(f"rank {rank} step {step} batch sum {batch.sum().item():.0f}", flush=True)
    finally:
        dist.destroy_process_group()

if __name__ == "__main__": main()
