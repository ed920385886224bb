"""The ledger's own cost, in one process: the same all_reduce and the same DDP step, watched (the ledger's
wrappers recording) and unwatched (torch's own functions put back, as if distlab were not there).

Blocks of calls alternate between the two states, so that load from other processes hits both alike; the
ledger writes each event line before it returns, so everything it costs falls inside a watched block.
Prints one JSON object. Run by benchmarks/run.py."""
import os, json, tempfile, time, statistics, warnings
warnings.simplefilter("ignore", FutureWarning)  # dist.reduce_op, met while listing the patched names
d = tempfile.mkdtemp(); os.environ.update(DISTLAB_RUN_DIR=d, RANK="0")  # the ledger records only inside a distlab run
import torch, torch.distributed as dist, torch.distributed.distributed_c10d as c10d
from torch.nn.parallel import DistributedDataParallel as DDP
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=f"file://{d}/store", world_size=1, rank=0)
from distlab.rank import ledger, events
ledger.install()

# every attribute the ledger replaced, as (owner, name, watched version); unwatched = its __wrapped__
PATCHED = [(owner, name, fn) for owner in (dist, c10d, torch.autograd, DDP, c10d.Work)
           for name, fn in list(vars(owner).items()) if getattr(fn, "_distlab", False)]
assert {n for _, n, _ in PATCHED} >= {"all_reduce", "backward", "forward", "wait"}, PATCHED

def watched(on: bool):
    for owner, name, fn in PATCHED: setattr(owner, name, fn if on else fn.__wrapped__)

t = torch.ones(1)
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10)))
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))

def colls(n=200):
    for _ in range(n): dist.all_reduce(t)
def steps(n=40):
    for _ in range(n):
        loss = torch.nn.functional.cross_entropy(model(x), y); model.zero_grad(); loss.backward()

def per_call(block, n: int, rounds: int) -> dict[bool, list[float]]:
    "Seconds per call, one figure per block, for watched (True) and unwatched (False) blocks that alternate."
    out = {True: [], False: []}
    for i in range(rounds):
        for on in ((True, False) if i % 2 else (False, True)):
            watched(on)
            t0 = time.perf_counter()
            block(n)
            out[on].append((time.perf_counter() - t0) / n)
    watched(True)
    return out

per_call(steps, 40, 4)  # warm up both states
c = per_call(colls, 200, 40)
s = per_call(steps, 40, 200)
# collectives: min over blocks (least disturbed); steps: blocks of 40 (~0.1 s), watched/unwatched paired per round
c_on, c_off = min(c[True]), min(c[False])
s_on, s_off = statistics.median(s[True]), statistics.median(s[False])
q = statistics.quantiles([(a / b - 1) * 100 for a, b in zip(s[True], s[False])], n=4)
lines = sum(1 for _ in open(events.events_path(d, 0)))
print(json.dumps({"per_collective_us": round((c_on - c_off) * 1e6, 1), "all_reduce_us_unwatched": round(c_off * 1e6, 1),
                  "ddp_step_ms_unwatched": round(s_off * 1e3, 3), "ddp_step_ms_watched": round(s_on * 1e3, 3),
                  "ddp_step_overhead_pct": round(q[1], 2), "ddp_step_overhead_pct_iqr": [round(q[0], 2), round(q[2], 2)],
                  "event_lines_written": lines}))
dist.destroy_process_group()
