"""Rank 1 all-reduces a tensor of a different size than rank 0 at the same call."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
for i in range(3):
    dist.all_reduce(torch.ones(4))
n = 4 if rank == 0 else 5  # the bug: rank-dependent size
dist.all_reduce(torch.ones(n))  # MARK:mismatch
dist.destroy_process_group()
