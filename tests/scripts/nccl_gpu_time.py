"""NCCL world 1: four collectives queued behind a long kernel (a sync all_reduce, an async one, two DDP backwards);
prints one JSON line with each one's host return time, the ledger's `dur_s` and how long after the long kernel was
queued its `completed` record came.

Run with DISTLAB_RUN_DIR, RANK=0, WORLD_SIZE=1, MASTER_ADDR, MASTER_PORT set, and DISTLAB_GPU_SPAN_EVERY=2: the
warm-up backward and `ddp_timed` (the 1st and 3rd) get their GPU span timed, `ddp_bare` (the 2nd) a bare end event."""
import json, time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from distlab.rank import ledger
from distlab.rank.tape import TapeReader

ledger.install()
torch.cuda.set_device(0)
dist.init_process_group("nccl")
reader = TapeReader(ledger.LEDGER.writer.tape.path, 0)

def sleep_cycles_for(seconds: float) -> int:
    "Cycles of `torch.cuda._sleep` that keep the stream busy about `seconds`, measured on this GPU."
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); torch.cuda._sleep(100_000_000); b.record(); b.synchronize()
    return int(100_000_000 * seconds / (a.elapsed_time(b) / 1e3))

SLEEP_S = 1.0
cycles = sleep_cycles_for(SLEEP_S)
t = torch.ones(1 << 20, device="cuda")
model = DDP(torch.nn.Linear(256, 256).cuda(), device_ids=[0])
x = torch.randn(64, 256, device="cuda")
model(x).sum().backward(); torch.cuda.synchronize()  # DDP's first backward builds its buckets: not measured

returned, queued = {}, {}
def timed(name, fn, before=lambda: None):
    arg = before()  # DDP: the forward, before the sleep (DDP's second forward rebuilds its buckets and waits for the GPU)
    torch.cuda._sleep(cycles)  # the stream is busy ~SLEEP_S before the collective can start
    queued[name] = time.time()
    t0 = time.perf_counter(); fn(arg); returned[name] = time.perf_counter() - t0
    torch.cuda.synchronize()

timed("sync", lambda _: dist.all_reduce(t))
timed("async", lambda _: dist.all_reduce(t, async_op=True).wait())
timed("ddp_bare", lambda out: out.sum().backward(), before=lambda: model(x))
timed("ddp_timed", lambda out: out.sum().backward(), before=lambda: model(x))

recs, deadline = [], time.time() + 10
while time.time() < deadline and sum(r["state"] == "completed" for r in recs if r["op"] == "all_reduce") < 5:
    recs += reader.read_new(); time.sleep(0.05)
started = {r["seq"]: r for r in recs if r["op"] == "all_reduce" and r["state"] == "started"}
done = {r["seq"]: r for r in recs if r["op"] == "all_reduce" and r["state"] == "completed"}
seqs = sorted(started)[-4:]  # the last four all_reduce records (the first is DDP's warm-up backward)
out = {name: {"returned_s": returned[name], "dur_s": done.get(s, {}).get("dur_s"),
              "completed_after_s": (done[s]["t"] - queued[name]) if s in done else None}
       for name, s in zip(("sync", "async", "ddp_bare", "ddp_timed"), seqs)}
print(json.dumps({"sleep_s": SLEEP_S, **out}), flush=True)
dist.destroy_process_group()
