"""Broken: rank 1 leaves with os._exit(7) after two steps (no exception, no exit event); rank 0 waits."""
import os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
x = torch.ones(8)
for step in range(4):
    dist.all_reduce(x)
    if rank == 1 and step == 1:
        os._exit(7)  # MARK:exit
dist.destroy_process_group()
