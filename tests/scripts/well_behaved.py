"""A correct script: prints to stdout and stderr, one all_reduce, then exits with the code in argv[1] or raises."""
import os
import sys
import warnings
import torch
import torch.distributed as dist

print("argv", sys.argv, "name", __name__, "file", os.path.basename(__file__))
print("path0", os.path.basename(sys.path[0]))
dist.init_process_group("gloo")
x = torch.ones(3) * (dist.get_rank() + 1)
dist.all_reduce(x)
print("sum", x.tolist(), flush=True)
print("to stderr", file=sys.stderr)
warnings.warn("a user warning")
dist.destroy_process_group()
if sys.argv[1] == "raise":
    raise RuntimeError("the script failed on purpose")
sys.exit(int(sys.argv[1]))
