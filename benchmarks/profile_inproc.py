"""The communication profiler's own cost, in one process: the same watched DDP step without a profiler (plain) and
with `StepProfiler` in each mode, side by side in one run.

Modes: `light` (DDP's own reducer timers read once per step, no comm hook: the default), `buckets` (a recording
comm hook on every bucket) and `hook` (no profiler, only a Python pass-through comm hook, torch's `allreduce_hook`:
the least a sampled `buckets` mode would cost on the steps it does not record, since DDP takes one hook for good),
and `plain2`, a second plain copy: the control, whose figure is what the method reads where there is nothing to read.
One DDP copy of one model per mode (world 1, gloo, the ledger installed as in every distlab run); the copies take
turns in blocks of steps, the order rotating every round, so that load from other processes hits all alike; each
figure is the median over rounds of (mode's block / plain block of the same round - 1), with its interquartile range;
beside it, the ratio of the modes' 10th-percentile blocks (the least disturbed ones), steadier when others load the machine.
The profilers' event-writer threads run beside the steps: their CPU time per step (from /proc) is reported too
(`writer_us`), and `step_done_us` is the median time of the profiler's own `step_done` call inside the loop,
`step_done_us_mean` its mean (light mode reads DDP's timers every `read_every` steps: the mean is its cost per step).

    python benchmarks/profile_inproc.py [WIDTH | Nms | ledger] [--rounds N] [--block STEPS] [--device cuda]

WIDTH: hidden width of the issue-8 loop (MLP 256-W-W-10, batch 64, 40 batches, 1 MB buckets: 512 gave a 2.2-4 ms
step on this machine's hosts, 1536 15-23 ms); `Nms` (e.g. `5ms`): the width whose plain step takes closest to N ms on
the machine at hand, measured before the run (a fixed width ran 2.2 ms steps on one host and 4 ms on another, so a
row meant for ~5 ms steps measured something else); `ledger`: the loop of benchmarks/ledger_inproc.py (width 512,
one batch, DDP's default 25 MB buckets: a ~2.5 ms step). `--device cuda`: every copy on one GPU over NCCL (world 1), each block ending with
a `torch.cuda.synchronize()`, where the profiler times communication with CUDA events. Prints one JSON object. Run
by benchmarks/run.py."""
import argparse, math, os, sys, json, tempfile, time, statistics, warnings
ap = argparse.ArgumentParser()
ap.add_argument("loop", nargs="?", default="512", help="hidden width of the issue-8 loop, a step time such as `5ms`, or `ledger`")
ap.add_argument("--rounds", type=int, default=100); ap.add_argument("--block", type=int, default=40)
ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
a = ap.parse_args()
CUDA = a.device == "cuda"
LEDGER = a.loop == "ledger"
TARGET_MS = float(a.loop[:-2]) if a.loop.endswith("ms") else None
WIDTH, BUCKET_MB = (512, 25) if LEDGER else (512 if TARGET_MS else int(a.loop), 1)
warnings.simplefilter("ignore", FutureWarning)
d = tempfile.mkdtemp(); os.environ.update(DISTLAB_RUN_DIR=d, RANK="0")  # the ledger and the profiler write inside a distlab run
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
torch.set_num_threads(1)
if CUDA: torch.cuda.set_device(0)
DEV = torch.device("cuda", 0) if CUDA else torch.device("cpu")
sync = torch.cuda.synchronize if CUDA else (lambda: None)
dist.init_process_group("nccl" if CUDA else "gloo", init_method=f"file://{d}/store", world_size=1, rank=0)
from distlab.rank import ledger, events
from distlab.rank.profile import StepProfiler
ledger.install()
MODES = ("plain", "plain2", "light", "buckets", "hook")

def net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, WIDTH), torch.nn.ReLU(), torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(),
                               torch.nn.Linear(WIDTH, 10)).to(DEV)
def batch(): return torch.randn(64, 256, device=DEV), torch.randint(0, 10, (64,), device=DEV)
if LEDGER: batches = [batch()] * a.block
else: batches = [batch() for _ in range(a.block)]

CANDIDATE_WIDTHS = (256, 384, 512, 640, 768, 1024, 1280, 1536, 1792, 2048, 2560, 3072)

def calibrate_width(target_ms: float) -> tuple[int, dict]:
    "The candidate width whose plain DDP step (median of 15 after 5 warm-up steps) is closest to `target_ms`, by ratio; and each width's step."
    global WIDTH
    seen = {}
    for w in CANDIDATE_WIDTHS:
        WIDTH = w
        model = DDP(net(), bucket_cap_mb=BUCKET_MB, device_ids=[0] if CUDA else None)
        times = []
        for i, (x, y) in enumerate(batches[:20]):
            sync(); t0 = time.perf_counter()
            loss = torch.nn.functional.cross_entropy(model(x), y); model.zero_grad(); loss.backward(); sync()
            if i >= 5: times.append(time.perf_counter() - t0)
        seen[w] = round(statistics.median(times) * 1e3, 3)
        del model
        if seen[w] > 2 * target_ms: break  # wider only gets slower
    best = min(seen, key=lambda w: abs(math.log(seen[w] / target_ms)))
    return best, seen

calibration = None
if TARGET_MS:
    WIDTH, calibration = calibrate_width(TARGET_MS)

def runner(mode: str):
    "A function that runs `n` steps of this mode's own DDP copy; and its profiler (or None)."
    model = DDP(net(), bucket_cap_mb=BUCKET_MB, device_ids=[0] if CUDA else None)
    if mode == "hook": model.register_comm_hook(None, default_hooks.allreduce_hook)
    prof = StepProfiler(model, mode=mode) if mode in ("light", "buckets") else None
    def run_plain(n):
        for x, y in batches[:n]:
            loss = torch.nn.functional.cross_entropy(model(x), y); model.zero_grad(); loss.backward()
    def run_profiled(n):
        for x, y in prof.data(batches[:n]):
            loss = torch.nn.functional.cross_entropy(model(x), y); model.zero_grad(); loss.backward()
            t0 = time.perf_counter(); prof.step_done(); done_s[mode].append(time.perf_counter() - t0)
    return (run_plain if prof is None else run_profiled), prof

done_s: dict[str, list[float]] = {"light": [], "buckets": []}  # each step_done call's seconds
runs = {m: runner(m) for m in MODES}

def thread_cpu_s(thread) -> float:
    "CPU seconds (user + system) one thread of this process has used, from /proc; 0 for None."
    if thread is None: return 0.0
    f = open(f"/proc/self/task/{thread.native_id}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

def per_step(rounds: int) -> dict[str, list[float]]:
    "Seconds per step, one figure per block, for every mode; the order of the modes rotates every round."
    out = {m: [] for m in MODES}
    for i in range(rounds):
        for m in MODES[i % len(MODES):] + MODES[:i % len(MODES)]:
            sync(); t0 = time.perf_counter()
            runs[m][0](a.block); sync()
            out[m].append((time.perf_counter() - t0) / a.block)
    return out

load_before = os.getloadavg()
per_step(4)  # warm up every copy; the profilers' writer threads start here
writers = {m: runs[m][1]._writer for m in done_s}
cpu0 = {m: thread_cpu_s(w) for m, w in writers.items()}
for v in done_s.values(): v.clear()
s = per_step(a.rounds)
writer_us = {m: (thread_cpu_s(w) - cpu0[m]) / (a.rounds * a.block) * 1e6 for m, w in writers.items()}
out = {"device": torch.cuda.get_device_name(0) if CUDA else "cpu", "backend": dist.get_backend(), "loop": "ledger_inproc" if LEDGER else f"width {WIDTH}", "width": WIDTH,
       "calibration": {"target_ms": TARGET_MS, "step_ms_by_width": calibration} if TARGET_MS else None, "bucket_cap_mb": BUCKET_MB, "rounds": a.rounds,
       "block": a.block, "step_ms_plain": round(statistics.median(s["plain"]) * 1e3, 3),
       "buckets_per_step": len(runs["buckets"][1].records[-1].buckets), "load_avg": [round(x, 2) for x in (*load_before, *os.getloadavg())]}
for m in MODES[1:]:
    q = statistics.quantiles([(x / p - 1) * 100 for x, p in zip(s[m], s["plain"])], n=4)
    p10 = lambda xs: statistics.quantiles(xs, n=10)[0]  # the least disturbed blocks: steadier than the median under heavy load
    out[m] = {"step_ms": round(statistics.median(s[m]) * 1e3, 3), "overhead_pct": round(q[1], 2), "overhead_pct_iqr": [round(q[0], 2), round(q[2], 2)],
              "overhead_pct_p10_blocks": round((p10(s[m]) / p10(s["plain"]) - 1) * 100, 2)}
    if m in done_s:
        timers = runs[m][1]._timers
        out[m].update(step_done_us=round(statistics.median(done_s[m]) * 1e6, 1), step_done_us_mean=round(statistics.mean(done_s[m]) * 1e6, 1),
                      writer_us=round(writer_us[m], 1), read_every=timers.read_every if timers else 1)
lines = [json.loads(ln) for ln in open(events.events_path(d, 0)) if '"ev": "step"' in ln]
out["step_events"] = {m: sum(1 for e in lines if e.get("profile") == m) for m in ("light", "buckets")}
print(json.dumps(out))
dist.destroy_process_group()
