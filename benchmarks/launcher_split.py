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
"""
import argparse, itertools, resource, statistics, subprocess, sys, tempfile, time
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

def main():
    ap = argparse.ArgumentParser(); ap.add_argument("--rounds", type=int, default=5); a = ap.parse_args()
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
