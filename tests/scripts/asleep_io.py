"""Healthy: rank 0 waits ~10 s on I/O (a slow subprocess's pipe, asleep) between two barriers; rank 1 waits."""
import os, subprocess, sys
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
dist.barrier()
if rank == 0:
    out = subprocess.run([sys.executable, "-c", f"import time; time.sleep({os.environ.get('ASLEEP_S', '10')}); print('saved')"],
                         capture_output=True, text=True).stdout
    print(f"rank 0 storage says {out.strip()}", flush=True)
dist.barrier()
print(f"rank {rank} done", flush=True)
dist.destroy_process_group()
