"""The ledger's own cost, in one process: the same all_reduce and the same DDP step, watched (the ledger's
wrappers recording) and unwatched (torch's own functions put back, as if distlab were not there).

Blocks of calls alternate between the two states, so that load from other processes hits both alike; the
ledger writes each event line before it returns, so everything it costs falls inside a watched block.
Prints one JSON object. Run by benchmarks/run.py.

    python benchmarks/ledger_inproc.py [--device cuda]

`--device cuda`: the same model and step on one GPU over NCCL (world 1), each block ending with a
`torch.cuda.synchronize()`. A step there takes ~1 ms and the host is the bottleneck, so every microsecond the
ledger adds shows: issue 8's hardest case for the watch's cost (<= 2 %).

On NCCL the ledger times the GPU span of one DDP backward in `DISTLAB_GPU_SPAN_EVERY` (default 16) and gives the
others a bare end event (their completion); `--device cuda` also runs the step with every backward timed
(`span_every_1_*`, the ledger before that sampling) in the same rotation, so the two read side by side."""
import argparse, os, json, tempfile, time, statistics, warnings
ap = argparse.ArgumentParser(); ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
ap.add_argument("--rounds", type=int, default=200, help="alternating pairs of step blocks")
ap.add_argument("--controls", action="store_true", help="cuda: two more states, `off2` (unwatched again: what no effect reads as) and `hostside` (watched, no CUDA events: what the events cost)")
_a = ap.parse_args(); CUDA, ROUNDS, CONTROLS = _a.device == "cuda", _a.rounds, _a.controls
warnings.simplefilter("ignore", FutureWarning)  # dist.reduce_op, met while listing the patched names
d = tempfile.mkdtemp(); os.environ.update(DISTLAB_RUN_DIR=d, RANK="0")  # the ledger records only inside a distlab run
import torch, torch.distributed as dist, torch.distributed.distributed_c10d as c10d
from torch.nn.parallel import DistributedDataParallel as DDP
torch.set_num_threads(1)
if CUDA: torch.cuda.set_device(0)
dist.init_process_group("nccl" if CUDA else "gloo", init_method=f"file://{d}/store", world_size=1, rank=0)
from distlab.rank import ledger, events
ledger.install()

# every attribute the ledger replaced, as (owner, name, watched version); unwatched = its __wrapped__
PATCHED = [(owner, name, fn) for owner in (dist, c10d, torch.autograd, DDP, c10d.Work)
           for name, fn in list(vars(owner).items()) if getattr(fn, "_distlab", False)]
assert {n for _, n, _ in PATCHED} >= {"all_reduce", "backward", "forward", "wait"}, PATCHED

def watched(on: bool):
    for owner, name, fn in PATCHED: setattr(owner, name, fn if on else fn.__wrapped__)

dev = torch.device("cuda", 0) if CUDA else torch.device("cpu")
sync = torch.cuda.synchronize if CUDA else (lambda: None)
t = torch.ones(1, device=dev)
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10)).to(dev), device_ids=[0] if CUDA else None)
x, y = torch.randn(64, 256, device=dev), torch.randint(0, 10, (64,), device=dev)

def colls(n=200):
    for _ in range(n): dist.all_reduce(t)
def steps(n=40):
    for _ in range(n):
        loss = torch.nn.functional.cross_entropy(model(x), y); model.zero_grad(); loss.backward()

def per_call(block, n: int, rounds: int, states=("on", "off")) -> dict:
    "Seconds per call, one figure per block, per state (`on`: watched, `off`: unwatched, `every1`: watched, every GPU span timed), in blocks that take turns (the order rotates each round)."
    out = {st: [] for st in states}
    for i in range(rounds):
        k = i % len(states)
        for st in states[k:] + states[:k]:
            watched(not st.startswith("off"))
            ledger._SPAN_EVERY[:] = [1] if st == "every1" else []
            ledger.LEDGER.gpu_side = CUDA and st != "hostside"  # hostside: the wrappers without any CUDA event
            sync(); t0 = time.perf_counter()
            block(n); sync()
            out[st].append((time.perf_counter() - t0) / n)
    watched(True); ledger._SPAN_EVERY[:] = []; ledger.LEDGER.gpu_side = CUDA
    return out

per_call(steps, 40, 4)  # warm up both states
c = per_call(colls, 200, 40)
s = per_call(steps, 40, ROUNDS, (("on", "off", "every1") + (("off2", "hostside") if CONTROLS else ())) if CUDA else ("on", "off"))
# collectives: min over blocks (least disturbed); steps: blocks of 40 (~0.1 s), watched/unwatched paired per round
c_on, c_off = min(c["on"]), min(c["off"])
s_on, s_off = statistics.median(s["on"]), statistics.median(s["off"])
q = statistics.quantiles([(a / b - 1) * 100 for a, b in zip(s["on"], s["off"])], n=4)
lines = sum(1 for _ in open(events.events_path(d, 0)))
every1 = {}
if CUDA:  # every backward timed on the GPU (the ledger before its sampling), paired with the same rounds' unwatched blocks
    q1 = statistics.quantiles([(a / b - 1) * 100 for a, b in zip(s["every1"], s["off"])], n=4)
    every1 = {"span_every_1_step_ms": round(statistics.median(s["every1"]) * 1e3, 3), "span_every_1_overhead_pct": round(q1[1], 2),
              "span_every_1_overhead_pct_iqr": [round(q1[0], 2), round(q1[2], 2)], "span_every": ledger._span_every()}
    for st in (("off2", "hostside") if CONTROLS else ()):
        qs = statistics.quantiles([(a / b - 1) * 100 for a, b in zip(s[st], s["off"])], n=4)
        every1[f"{st}_overhead_pct"], every1[f"{st}_overhead_pct_iqr"] = round(qs[1], 2), [round(qs[0], 2), round(qs[2], 2)]
print(json.dumps({"device": torch.cuda.get_device_name(0) if CUDA else "cpu", "backend": dist.get_backend(),
                  "torch": torch.__version__, "per_collective_us": round((c_on - c_off) * 1e6, 1), "all_reduce_us_unwatched": round(c_off * 1e6, 1),
                  "ddp_step_ms_unwatched": round(s_off * 1e3, 3), "ddp_step_ms_watched": round(s_on * 1e3, 3),
                  "ddp_step_overhead_pct": round(q[1], 2), "ddp_step_overhead_pct_iqr": [round(q[0], 2), round(q[2], 2)],
                  "event_lines_written": lines, **every1}))
dist.destroy_process_group()
