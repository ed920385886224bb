"""Broken: rank 1 waits forever on an event nobody sets (a helper thread of its own runs beside it);
rank 0 waits in the next all_reduce."""
import threading, time
import torch
import torch.distributed as dist


def background_logger(stop):
    while not stop.wait(0.5): pass


def wait_for_signal(ready):
    ready.wait()  # MARK:wait


dist.init_process_group("gloo")
rank = dist.get_rank()
threading.Thread(target=background_logger, args=(threading.Event(),), daemon=True).start()
x = torch.ones(8)
for step in range(3):
    dist.all_reduce(x)
    if rank == 1 and step == 1:
        wait_for_signal(threading.Event())
dist.destroy_process_group()
