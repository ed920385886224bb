"""Rank 1 is killed with SIGKILL (as the OOM killer would) after two steps."""
import os
import signal
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
x = torch.ones(8)
for step in range(4):
    dist.all_reduce(x)  # MARK:allreduce
    if rank == 1 and step == 1:
        os.kill(os.getpid(), signal.SIGKILL)
dist.destroy_process_group()
