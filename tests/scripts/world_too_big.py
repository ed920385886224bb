"""The script hard-codes world_size=4; launched with 2 processes, init waits for ranks 2 and 3."""
import os
import torch.distributed as dist

dist.init_process_group("gloo", world_size=4, rank=int(os.environ["RANK"]))  # MARK:init
dist.barrier()
dist.destroy_process_group()
