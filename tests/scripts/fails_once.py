"""Rank 1 fails once, in torchrun's first generation (a marker file remembers it); the restarted job succeeds."""
import os, sys
import torch, torch.distributed as dist

marker = sys.argv[1]
dist.init_process_group("gloo")
t = torch.ones(2)
dist.all_reduce(t)
if dist.get_rank() == 1 and not os.path.exists(marker):
    open(marker, "w").close()
    raise RuntimeError("flaky disk on rank 1")
dist.all_reduce(t)
dist.barrier()
print("done", t.tolist(), flush=True)
dist.destroy_process_group()
