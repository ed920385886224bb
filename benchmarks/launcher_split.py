"""Where the launcher's extra wall time goes (issue 8's launcher target): the same short DDP script (`ddp_loop.py`,
world 2, 20 steps) as bare torchrun and under `launch()` with parts of distlab turned off, in rotating order.

    python benchmarks/launcher_split.py [--rounds 5]

bare          python -m torch.distributed.run --standalone ...
unwatched     launch(watch=False): the launcher, its reaper and torchrun's log redirection; the ranks run bare
no-health     launch() with the health sampler off (DISTLAB_HEALTH_EVERY_S=0): shim, ledger, heartbeat, watcher
watched       launch() as a user gets it
Prints the median wall time of each and its ratio to bare.
"""
import argparse, itertools, statistics, subprocess, sys, tempfile, time
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from distlab.run.launch import launch  # noqa: E402
LOOP, ARGS = HERE / "ddp_loop.py", ["--steps", "20", "--warmup", "2", "--width", "64"]

def timed(kind: str, root: Path) -> float:
    t = time.perf_counter()
    if kind == "bare":
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone", str(LOOP), *ARGS],
                       check=True, capture_output=True, cwd=root)
    else:
        kw = {"unwatched": {"watch": False}, "no-health": {"env": {"DISTLAB_HEALTH_EVERY_S": "0"}}, "watched": {}}[kind]
        res = launch(LOOP, ARGS, nproc=2, runs_root=root, timeout_s=120, **kw).wait()
        if res.status != "ok": raise RuntimeError(f"{kind}: {res.status}")
    return time.perf_counter() - t

def main():
    ap = argparse.ArgumentParser(); ap.add_argument("--rounds", type=int, default=5); a = ap.parse_args()
    kinds = ["bare", "unwatched", "no-health", "watched"]
    walls = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as d:
        timed("bare", Path(d))  # warm the page cache
        for r in range(a.rounds):
            order = kinds[r % 4:] + kinds[:r % 4]
            for k in order: walls[k].append(timed(k, Path(d)))
    base = statistics.median(walls["bare"])
    for k in kinds:
        print(f"{k:10s} median {statistics.median(walls[k]):6.2f} s  x{statistics.median(walls[k]) / base:.3f}  {[round(w, 2) for w in walls[k]]}")

if __name__ == "__main__": main()
