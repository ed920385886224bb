# A correct script that does not import distlab: its output and exit code must be the same under distlab launch.
import sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.arange(4.0) * (dist.get_rank() + 1)
dist.all_reduce(t)
print(f"rank {dist.get_rank()}: {t.tolist()}")
print(f"rank {dist.get_rank()} says hello on stderr", file=sys.stderr)
dist.barrier()
dist.destroy_process_group()
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
