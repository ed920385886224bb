"""A plain DDP-free gloo script for one rank per emulated node. argv: `mismatch` (the rank on host node1 calls a
barrier where the others all-reduce, at step 3: the job hangs), `lock` (at step 3 the rank on node1 waits forever
on a lock it holds, outside any collective) or `forever` (all-reduce steps until stopped)."""
import socket, sys, threading, time
import torch
import torch.distributed as dist

mode = sys.argv[1] if len(sys.argv) > 1 else "mismatch"
dist.init_process_group("gloo")
on_node1 = socket.gethostname() == "node1"
x = torch.ones(1024)
for step in range(6 if mode in ("mismatch", "lock") else 10**9):
    if mode == "mismatch" and step == 3 and on_node1:
        dist.barrier()  # the culprit: a collective the other node's rank never calls here
    elif mode == "lock" and step == 3 and on_node1:
        lock = threading.Lock(); lock.acquire(); lock.acquire()  # the culprit: a deadlock outside any collective
    else:
        dist.all_reduce(x)
    if step == 2: print("step", step, "on", socket.gethostname(), flush=True)
    time.sleep(0.05)
dist.destroy_process_group()
