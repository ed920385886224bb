"""Healthy: rank 0 spends ~12 s of CPU computing and writing a 'checkpoint' between two barriers; rank 1 waits."""
import os, sys, tempfile, time
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
dist.barrier()
if rank == 0:
    end, n = time.monotonic() + float(os.environ.get("BUSY_S", "12")), 0
    with tempfile.TemporaryFile() as f:
        while time.monotonic() < end:
            w = torch.randn(128, 128)
            f.write((w @ w).numpy().tobytes()); n += 1
    print(f"rank 0 wrote {n} blocks", flush=True)
dist.barrier()
print(f"rank {rank} done", flush=True)
dist.destroy_process_group()
