"""NCCL world 1: hold the GPU stream with a long kernel, all_reduce, and report what the ledger's tape says meanwhile.

Run with DISTLAB_RUN_DIR, RANK=0, WORLD_SIZE=1, MASTER_ADDR, MASTER_PORT set; prints one JSON line."""
import json, os, time
import torch, torch.distributed as dist
from distlab.rank import ledger
from distlab.rank.tape import TapeReader
from distlab.contract import RUN_DIR_ENV

ledger.install()
dist.init_process_group("nccl")
torch.cuda.set_device(0)
reader = TapeReader(ledger.LEDGER.writer.tape.path, 0)
t = torch.ones(1 << 20, device="cuda")
dist.all_reduce(t); torch.cuda.synchronize()  # NCCL makes its communicator at the first collective, and that call blocks the host
time.sleep(0.3); reader.read_new()  # its records are not what this script looks at
a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
a.record(); torch.cuda._sleep(100_000_000); b.record(); b.synchronize()
torch.cuda._sleep(int(100_000_000 * 1.5 / (a.elapsed_time(b) / 1e3)))  # ~1.5 s of GPU time before the all_reduce can run
t0 = time.time(); out = dist.all_reduce(t); returned_s = time.time() - t0
time.sleep(0.5)  # the heartbeat polls the work every 0.1 s
while_queued = [(e["seq"], e["state"]) for e in reader.read_new() if e["op"] == "all_reduce" and e["seq"] > 1]
torch.cuda.synchronize()
deadline = time.time() + 5
after = list(while_queued)
while time.time() < deadline and ("completed" not in [s for _, s in after]):
    after += [(e["seq"], e["state"]) for e in reader.read_new() if e["op"] == "all_reduce" and e["seq"] > 1]; time.sleep(0.05)
print(json.dumps({"returned": repr(out), "returned_s": returned_s, "while_queued": while_queued, "after": after}), flush=True)
dist.destroy_process_group()
