"""Where the launcher's extra wall time goes (issue 8's launcher target): the same short DDP script (`ddp_loop.py`,
world 2, 20 steps) as bare torchrun and under `launch()` with parts of distlab turned off, in rotating order.

    python benchmarks/launcher_split.py [--rounds 5]

bare          python -m torch.distributed.run --standalone ...
unwatched     launch(watch=False): the launcher, its reaper and torchrun's log redirection; the ranks run bare
no-health     launch() with the health sampler off (DISTLAB_HEALTH_EVERY_S=0): shim, ledger, heartbeat, watcher
watched       launch() as a user gets it: torchrun writes each rank's log file, the launcher follows them
watched-tee   the same with a log dir given (`log_dir=`), where torchrun copies every line itself (`--tee 3`)
Prints the median wall time of each and its ratio to bare, and the median CPU seconds (user + system) of the whole
tree: this process's own (the launcher's threads) and every process it waited for (torchrun, its ranks, the
reaper). On 2 cores the start-up of three Python processes that import torch is CPU-bound, and single walls of
one kind spread by 20-40 %: the CPU figure is the steadier of the two and says whether distlab adds work.

    python benchmarks/launcher_split.py --device cuda [--rounds 3] [--job train]   (a GPU machine; `--cli` runs the same on CPU)

The command a user types, on the job where the launcher's own time shows most (issue 26): a trivial world-1 job
(init, one all_reduce, exit; NCCL on `cuda`, gloo on CPU), as a subprocess each, in rotating order:
bare          python -m torch.distributed.run --standalone --nproc-per-node 1 job.py
launch        python -m distlab.cli launch --nproc-per-node 1 job.py (backend auto: nccl where there is a GPU)
no-watch      the same with --no-watch
`--split` adds two more, each `launch` with a part of the watch turned off: no-health (DISTLAB_HEALTH_EVERY_S=0, no
health sampler, so no NVML reads) and no-gpu-spans (DISTLAB_GPU_SPAN_EVERY huge: no DDP backward's GPU span timed).
Prints each one's median wall, its ratio to bare and its seconds over bare (goals on a GPU host: launch <= 1.05x and
<= +0.5 s, no-watch <= 1.02x), every wall, and how many torch modules the launcher process itself imported (from one
more run under `python -X importtime`: 0 is the point), then the same as one JSON line.
"""
import argparse, itertools, json, os, re, resource, statistics, subprocess, sys, tempfile, time
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from distlab.run.launch import launch  # noqa: E402
LOOP, ARGS = HERE / "ddp_loop.py", ["--steps", "20", "--warmup", "2", "--width", "64"]

def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

def timed(kind: str, root: Path) -> tuple[float, float]:
    "(wall seconds, CPU seconds of this process and its waited-for children) of one run of `kind`."
    t, c = time.perf_counter(), _cpu()
    if kind == "bare":
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone", str(LOOP), *ARGS],
                       check=True, capture_output=True, cwd=root)
    else:
        kw = {"unwatched": {"watch": False}, "no-health": {"env": {"DISTLAB_HEALTH_EVERY_S": "0"}}, "watched": {},
              "watched-tee": {"log_dir": tempfile.mkdtemp(dir=root)}}[kind]
        res = launch(LOOP, ARGS, nproc=2, runs_root=root, timeout_s=120, **kw).wait()
        if res.status != "ok": raise RuntimeError(f"{kind}: {res.status}")
    return time.perf_counter() - t, _cpu() - c

JOB = """import os, torch, torch.distributed as dist
cuda = os.environ["JOB_DEVICE"] == "cuda"
if cuda: torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl" if cuda else "gloo")
t = torch.ones(1024, device="cuda" if cuda else "cpu")
dist.all_reduce(t)
if cuda: torch.cuda.synchronize()
dist.destroy_process_group()
"""
TRAIN_JOB = """import os, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
cuda = os.environ["JOB_DEVICE"] == "cuda"
dev = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
if cuda: torch.cuda.set_device(dev)
dist.init_process_group("nccl" if cuda else "gloo")
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 10)).to(dev), device_ids=[dev.index] if cuda else None)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randn(256, 256, device=dev), torch.randint(0, 10, (256,), device=dev)
for step in range(int(os.environ.get("JOB_STEPS", 4000))):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
    if step % 500 == 0: print(f"step {step} loss {loss.item():.4f}", flush=True)
if cuda: torch.cuda.synchronize()
dist.destroy_process_group()
"""
CLI_KINDS = ("bare", "launch", "no-watch")
SPLIT_KINDS = ("no-health", "no-gpu-spans")  # --split: the watch without its health sampler, without its timed GPU spans
SPLIT_ENV = {"no-health": {"DISTLAB_HEALTH_EVERY_S": "0"}, "no-gpu-spans": {"DISTLAB_GPU_SPAN_EVERY": "1000000000"}}

def cli_argv(kind: str, job: Path) -> list[str]:
    "The command line of one run of `kind`: bare torchrun, or `distlab launch` (with or without the watch)."
    if kind == "bare": return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1", str(job)]
    return [sys.executable, "-m", "distlab.cli", "launch", "--nproc-per-node", "1"] + (["--no-watch"] if kind == "no-watch" else []) + [str(job)]  # the split kinds: launch, with SPLIT_ENV

def cli_env(device: str, root: Path) -> dict:
    return {**os.environ, "JOB_DEVICE": device, "DISTLAB_RUNS_ROOT": str(root / "runs"),
            "PYTHONPATH": os.pathsep.join([str(HERE.parent)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}

def timed_cli(kind: str, job: Path, env: dict, root: Path) -> float:
    "Wall seconds of one run of `kind`, from the command's start to its exit."
    t = time.perf_counter()
    p = subprocess.run(cli_argv(kind, job), capture_output=True, text=True, cwd=root, env={**env, **SPLIT_ENV.get(kind, {})}, timeout=300)
    if p.returncode != 0: raise RuntimeError(f"{kind} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return time.perf_counter() - t

def launcher_torch_modules(job: Path, env: dict, root: Path) -> tuple[int, str]:
    "(torch modules the `distlab launch` process imported, the backend it chose), from one run under `python -X importtime`."
    argv = cli_argv("launch", job)
    p = subprocess.run(argv[:1] + ["-X", "importtime"] + argv[1:], capture_output=True, text=True, cwd=root, env=env, timeout=300)
    if p.returncode != 0: raise RuntimeError(f"launch -X importtime exited {p.returncode}:\n{p.stderr[-3000:]}")
    names = [l.rsplit("|", 1)[1].strip() for l in p.stderr.splitlines() if l.startswith("import time:") and "|" in l]
    runs = sorted((root / "runs").glob("*/run.json"), key=lambda f: f.stat().st_mtime)
    backend = json.loads(runs[-1].read_text()).get("backend") if runs else None
    return sum(bool(re.match(r"torch(\.|$)", n)) for n in names), backend

def cli_split(device: str, rounds: int, job_kind: str = "trivial", split: bool = False) -> dict:
    "The command-line comparison: medians, ratios and seconds over bare, every wall (`split`: also the watch without parts of it)."
    kinds = CLI_KINDS + (SPLIT_KINDS if split else ())
    walls = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as d:
        root = Path(d); job = root / "job.py"; job.write_text(TRAIN_JOB if job_kind == "train" else JOB)
        env = cli_env(device, root)
        timed_cli("bare", job, env, root)  # warm the page cache (and the GPU driver)
        for r in range(rounds):
            for k in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
                walls[k].append(timed_cli(k, job, env, root))
                print(f"round {r + 1} {k:9s} {walls[k][-1]:6.2f} s", flush=True)  # what a cut-short run still shows
        torch_mods, backend = launcher_torch_modules(job, env, root)
    base = statistics.median(walls["bare"])
    out = {"device": device, "job": job_kind, "rounds": rounds, "backend": backend, "launcher_torch_modules": torch_mods, "kinds": {}}
    for k in kinds:
        w = statistics.median(walls[k])
        out["kinds"][k] = {"median_s": round(w, 3), "ratio": round(w / base, 3), "over_bare_s": round(w - base, 3),
                           "walls_s": [round(x, 2) for x in walls[k]]}
        print(f"{k:9s} wall {w:6.2f} s x{w / base:.3f}  {w - base:+.2f} s  walls {out['kinds'][k]['walls_s']}")
    print(f"the launcher chose backend {backend!r} and imported {torch_mods} torch modules itself")
    return out

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=None, help="alternating rounds (default 5 on CPU, 3 with --device cuda)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cuda: the command-line split on a trivial NCCL job")
    ap.add_argument("--cli", action="store_true", help="the command-line split (as --device cuda does) on CPU, with gloo")
    ap.add_argument("--split", action="store_true", help="the command-line split: also `launch` without the health sampler (no-health) and without timed GPU spans (no-gpu-spans)")
    ap.add_argument("--job", choices=("trivial", "train"), default="trivial",
                    help="the command-line split's job: trivial (init, one all_reduce) or train (4000 DDP steps with AdamW, ~15 s on a GPU host; JOB_STEPS changes the count)")
    a = ap.parse_args()
    if a.device == "cuda" or a.cli:
        print(json.dumps(cli_split(a.device, a.rounds or 3, a.job, a.split)))
        return
    a.rounds = a.rounds or 5
    kinds = ["bare", "unwatched", "no-health", "watched", "watched-tee"]
    walls, cpus = {k: [] for k in kinds}, {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as d:
        timed("bare", Path(d))  # warm the page cache
        for r in range(a.rounds):
            order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
            for k in order:
                w, c = timed(k, Path(d)); walls[k].append(w); cpus[k].append(c)
    base, cbase = statistics.median(walls["bare"]), statistics.median(cpus["bare"])
    for k in kinds:
        w, c = statistics.median(walls[k]), statistics.median(cpus[k])
        print(f"{k:11s} wall {w:6.2f} s x{w / base:.3f}  CPU {c:6.2f} s x{c / cbase:.3f}  walls {[round(x, 2) for x in walls[k]]}")

if __name__ == "__main__": main()
