"""Where the watch's cost goes on a DDP step: the same step as benchmarks/ledger_inproc.py, profiled with cProfile
watched and unwatched, and the ledger's own functions listed by their time per step (issue 26 item 2: find the
microseconds a ~1 ms GPU step loses to the watch before removing them).

    python benchmarks/watch_profile.py [--device cuda] [--steps 2000] [--top 15]

Prints a table (function, calls per step, own us per step, cumulative us per step) of every function whose file is
in distlab/, the profiled wall time per step watched and unwatched (cProfile itself slows both; compare the rows,
not the totals, with ledger_inproc's figures), and a JSON line with the same."""
import argparse, cProfile, json, os, pstats, tempfile, time, warnings
ap = argparse.ArgumentParser(); ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
ap.add_argument("--steps", type=int, default=2000); ap.add_argument("--top", type=int, default=15)
a = ap.parse_args(); CUDA = a.device == "cuda"
warnings.simplefilter("ignore", FutureWarning)
d = tempfile.mkdtemp(); os.environ.update(DISTLAB_RUN_DIR=d, RANK="0")  # the ledger records only inside a distlab run
import torch, torch.distributed as dist, torch.distributed.distributed_c10d as c10d
from torch.nn.parallel import DistributedDataParallel as DDP
torch.set_num_threads(1)
if CUDA: torch.cuda.set_device(0)
dist.init_process_group("nccl" if CUDA else "gloo", init_method=f"file://{d}/store", world_size=1, rank=0)
from distlab.rank import ledger
ledger.install()
PATCHED = [(owner, name, fn) for owner in (dist, c10d, torch.autograd, DDP, c10d.Work)
           for name, fn in list(vars(owner).items()) if getattr(fn, "_distlab", False)]
def watched(on: bool):
    for owner, name, fn in PATCHED: setattr(owner, name, fn if on else fn.__wrapped__)

dev = torch.device("cuda", 0) if CUDA else torch.device("cpu")
sync = torch.cuda.synchronize if CUDA else (lambda: None)
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10)).to(dev), device_ids=[0] if CUDA else None)
x, y = torch.randn(64, 256, device=dev), torch.randint(0, 10, (64,), device=dev)
def steps(n):
    for _ in range(n):
        loss = torch.nn.functional.cross_entropy(model(x), y); model.zero_grad(); loss.backward()

def profile(on: bool):
    watched(on); steps(50); sync()  # warm
    prof = cProfile.Profile()
    t0 = time.perf_counter(); prof.enable(); steps(a.steps); sync(); prof.disable()
    return prof, (time.perf_counter() - t0) / a.steps

prof_off, off_s = profile(False)
prof_on, on_s = profile(True)
watched(True)
st = pstats.Stats(prof_on)
rows = []
for (file, line, fn), (cc, nc, tt, ct, _) in st.stats.items():
    if "/distlab/" not in file: continue
    rows.append({"function": f"{os.path.relpath(file, os.path.dirname(os.path.dirname(file)))}:{line}({fn})",
                 "calls_per_step": nc / a.steps, "own_us": tt / a.steps * 1e6, "cum_us": ct / a.steps * 1e6})
rows.sort(key=lambda r: -r["own_us"])
own_total = sum(r["own_us"] for r in rows)
print(f"{a.device}: profiled step {on_s * 1e6:.0f} us watched, {off_s * 1e6:.0f} us unwatched ({a.steps} steps each, under cProfile)")
print(f"distlab's own functions: {own_total:.1f} us a step in all ({len(rows)} functions); the top {a.top}:")
print(f"{'function':<70} {'calls/step':>10} {'own us':>8} {'cum us':>8}")
for r in rows[:a.top]: print(f"{r['function'][:70]:<70} {r['calls_per_step']:>10.2f} {r['own_us']:>8.2f} {r['cum_us']:>8.2f}")
print(json.dumps({"device": a.device, "steps": a.steps, "profiled_step_us": {"watched": on_s * 1e6, "unwatched": off_s * 1e6},
                  "distlab_own_us_per_step": own_total, "top": rows[:a.top]}))
dist.destroy_process_group()
