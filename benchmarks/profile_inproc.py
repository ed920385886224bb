"""The communication profiler's own cost, in one process: the same watched DDP step with and without
`StepProfiler` (its recording comm hook on every bucket, its data-wait timing and one `step` event per step).

Two DDP copies of one model (world 1, gloo, the ledger installed as in every distlab run) take turns in blocks of
steps, so that load from other processes hits both alike; the figure is the median of the per-round ratios.
Prints one JSON object. Run by benchmarks/run.py."""
import os, sys, json, tempfile, time, statistics, warnings
WIDTH = int(sys.argv[1]) if len(sys.argv) > 1 else 512  # hidden width: 512 gives a ~4 ms step here, 1536 ~25 ms
warnings.simplefilter("ignore", FutureWarning)
d = tempfile.mkdtemp(); os.environ.update(DISTLAB_RUN_DIR=d, RANK="0")  # the ledger and the profiler write inside a distlab run
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=f"file://{d}/store", world_size=1, rank=0)
from distlab.rank import ledger, events
from distlab.rank.profile import StepProfiler
ledger.install()

def net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, WIDTH), torch.nn.ReLU(), torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(),
                               torch.nn.Linear(WIDTH, 10))
plain, profiled = DDP(net(), bucket_cap_mb=1), DDP(net(), bucket_cap_mb=1)  # 1 MB buckets: several per step, so the hook runs often
prof = StepProfiler(profiled)
batches = [(torch.randn(64, 256), torch.randint(0, 10, (64,))) for _ in range(40)]

def run_plain(n=40):
    for x, y in batches[:n]:
        loss = torch.nn.functional.cross_entropy(plain(x), y); plain.zero_grad(); loss.backward()
def run_profiled(n=40):
    for x, y in prof.data(batches[:n]):
        loss = torch.nn.functional.cross_entropy(profiled(x), y); profiled.zero_grad(); loss.backward()
        prof.step_done()

def per_step(rounds: int) -> dict[bool, list[float]]:
    out = {True: [], False: []}
    for i in range(rounds):
        for on in ((True, False) if i % 2 else (False, True)):
            t0 = time.perf_counter()
            (run_profiled if on else run_plain)(40)
            out[on].append((time.perf_counter() - t0) / 40)
    return out

per_step(4)  # warm up both
s = per_step(100)
ratios = [(a / b - 1) * 100 for a, b in zip(s[True], s[False])]
q = statistics.quantiles(ratios, n=4)
print(json.dumps({"width": WIDTH, "ddp_step_ms_plain": round(statistics.median(s[False]) * 1e3, 3),
                  "ddp_step_ms_profiled": round(statistics.median(s[True]) * 1e3, 3),
                  "buckets_per_step": len(prof.records[-1].buckets),
                  "profile_overhead_pct": round(q[1], 2), "profile_overhead_pct_iqr": [round(q[0], 2), round(q[2], 2)],
                  "step_events": sum(1 for ln in open(events.events_path(d, 0)) if '"ev": "step"' in ln)}))
dist.destroy_process_group()
