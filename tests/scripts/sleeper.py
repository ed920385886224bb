"""Rank 1 gets stuck in user code while rank 0 waits in the next all_reduce."""
import time
import torch
import torch.distributed as dist


def slow_rank_only_work():
    time.sleep(600)  # MARK:sleep


dist.init_process_group("gloo")
rank = dist.get_rank()
x = torch.ones(8)
for step in range(3):
    dist.all_reduce(x)
    if rank == 1 and step == 1:
        slow_rank_only_work()
dist.destroy_process_group()
