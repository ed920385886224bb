"""Rank 1 leaves with os._exit(7) after one all-reduce (no exception, no exit event); rank 0 waits in a barrier."""
import os
import torch, torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(2)
dist.all_reduce(t)
if dist.get_rank() == 1:
    os._exit(7)
dist.barrier()
dist.destroy_process_group()
