"""Rank 1 raises in its own code after two steps; rank 0 goes on to the next all_reduce."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
x = torch.ones(8)
for step in range(4):
    dist.all_reduce(x)
    if rank == 1 and step == 1:
        raise ValueError("bad batch on rank 1")  # MARK:raise
dist.destroy_process_group()
