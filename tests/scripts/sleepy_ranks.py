"""A user-like script whose ranks start a DataLoader worker process, then sleep: something to stop."""
import sys, time
import torch, torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset

dist.init_process_group("gloo")
loader = DataLoader(TensorDataset(torch.arange(64.)), batch_size=4, num_workers=1, persistent_workers=True)
it = iter(loader); next(it)  # the worker process is alive from here on
print(f"rank {dist.get_rank()} ready", flush=True)
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 600)
