"""The memory guard's false-alarm rate and catch rate, side by side, with every core kept busy (issue 26 item 6).

Runs RUNS healthy and RUNS leaky copies of `nbs/31_memory_guards.ipynb`'s loop (a 64-1024-1 MLP, batch 1024, 14
steps; the leaky one keeps each loss tensor with its graph, ~4.3 MiB a step), alternating, each in a fresh
process forked from a parent that imported torch and ran nothing (a new heap, as the notebook and a user's job
have, without paying torch's import per run), while LOAD busy-loop processes keep the cores busy (default: one
per core). Each run feeds `MemoryGrowthDetector()` (defaults: reads the bytes held) and also
records resident memory, on which the rule before this change (least-squares slope >= 1 MiB/step over the last
6 steps after 2 warm-up steps, rising in >= 80 % of them by any amount) is evaluated, for comparison.

Usage: python benchmarks/guard_alarms.py [--runs 50] [--load N] [--steps 14]
Prints a line per 5 + 5 runs and a JSON summary (also when stopped with Ctrl-C or SIGTERM: of the runs done). Target: 0 alarms in 50 healthy runs, every leaky run caught."""
import argparse, json, os, signal, statistics, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BUSY = "import os\np = os.getppid()\nwhile os.getppid() == p:\n    for _ in range(200000): pass"  # a core kept busy, ends with us


def one_run(leaky: bool, steps: int) -> dict:
    "In a child: the notebook's loop with the detector; memory after each step, as the detector read it and as RSS."
    import torch
    from torch import nn
    from distlab.rank.memory import process_memory
    from distlab.train.memory_guards import MemoryGrowthDetector, held_bytes
    model = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    detector, losses, rss, held, found = MemoryGrowthDetector(), [], [], [], None
    for step in range(steps):
        opt.zero_grad()
        loss = model(torch.randn(1024, 64)).pow(2).mean()
        loss.backward(retain_graph=leaky)
        opt.step()
        losses.append(loss if leaky else loss.item())
        rss.append(process_memory()["rss_bytes"]); held.append(held_bytes())
        g = detector.observe(step)
        if g is not None and found is None: found = {"step": step, "mib_per_step": g.bytes_per_step / 2**20}
    return {"leaky": leaky, "found": found, "reads": detector.reads, "rss": rss, "held": held}


def old_rule(ys: list[int], window: int = 6, warmup: int = 2, min_bytes: int = 2**20) -> bool:
    "The detector's rule before this change, on a series: least-squares slope and strict rises."
    for end in range(warmup + window, len(ys) + 1):
        w = ys[end - window:end]
        n = len(w); mx = (n - 1) / 2; my = sum(w) / n
        slope = sum((i - mx) * (y - my) for i, y in enumerate(w)) / sum((i - mx) ** 2 for i in range(n))
        if slope >= min_bytes and sum(b > a for a, b in zip(w, w[1:])) >= 0.8 * (n - 1): return True
    return False


def forked_run(leaky: bool, steps: int) -> dict:
    "`one_run` in a child forked from this process (which must not have run a torch op: no thread pool to copy)."
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            with os.fdopen(w, "w") as f: f.write(json.dumps(one_run(leaky, steps)))
            code = 0
        finally: os._exit(code)
    os.close(w)
    with os.fdopen(r) as f: text = f.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not text: raise SystemExit(f"{'leaky' if leaky else 'healthy'} run failed (wait status {status})")
    return json.loads(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50, help="healthy runs, and as many leaky ones")
    ap.add_argument("--load", type=int, default=os.cpu_count(), help="busy-loop processes beside the runs")
    ap.add_argument("--steps", type=int, default=14)
    a = ap.parse_args()
    if a.runs < 1 or a.load < 0 or a.steps < 9:
        ap.error(f"--runs {a.runs} --load {a.load} --steps {a.steps}: need runs >= 1, load >= 0, steps >= 9 (2 warm-up + a 6-step window + 1)")
    import warnings; warnings.simplefilter("ignore")
    import torch, distlab.train.memory_guards  # imported once here; every run is a fresh fork of this process
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))  # stopped: report what ran
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(a.load)]
    interrupted = False
    rows, t0 = {"healthy": [], "leaky": []}, time.perf_counter()
    try:
        for i in range(2 * a.runs):
            kind = ("healthy", "leaky")[i % 2]
            rows[kind].append(forked_run(kind == "leaky", a.steps))
            if (i + 1) % 10 == 0:
                h, l = rows["healthy"], rows["leaky"]
                print(f"{len(h)} + {len(l)} runs, {time.perf_counter() - t0:.0f} s: healthy alarms {sum(r['found'] is not None for r in h)} "
                      f"(old rule on RSS {sum(old_rule(r['rss']) for r in h)}), leaky caught {sum(r['found'] is not None for r in l)} "
                      f"(old {sum(old_rule(r['rss']) for r in l)})", flush=True)
    except KeyboardInterrupt: interrupted = True
    finally:
        for p in busy: p.kill()
        for p in busy: p.wait()
    n = min(len(rows["healthy"]), len(rows["leaky"]))
    if n == 0: raise SystemExit("stopped before a healthy and a leaky run finished")
    h, l = rows["healthy"][:n], rows["leaky"][:n]
    mib = lambda b: round(b / 2**20, 2)
    rise = lambda ys: max(ys[2:]) - ys[2]  # growth after the warm-up, healthy runs
    summary = {
        "runs_each": len(h), "load_processes": a.load, "cores": os.cpu_count(), "steps": a.steps, "reads": sorted({r["reads"] for r in h + l}),
        "healthy_alarms": sum(r["found"] is not None for r in h), "leaky_caught": sum(r["found"] is not None for r in l),
        "old_rule_on_rss_healthy_alarms": sum(old_rule(r["rss"]) for r in h), "old_rule_on_rss_leaky_caught": sum(old_rule(r["rss"]) for r in l),
        "healthy_rss_rise_mib_median_max": [mib(statistics.median(rise(r["rss"]) for r in h)), mib(max(rise(r["rss"]) for r in h))],
        "healthy_held_rise_mib_median_max": [mib(statistics.median(rise(r["held"]) for r in h)), mib(max(rise(r["held"]) for r in h))],
        "leak_mib_per_step_median": round(statistics.median(r["found"]["mib_per_step"] for r in l if r["found"]), 2) if any(r["found"] for r in l) else None,
        "leak_caught_at_step_max": max((r["found"]["step"] for r in l if r["found"]), default=None),
        "wall_s": round(time.perf_counter() - t0, 1), "interrupted": interrupted}
    print(f"false alarms {summary['healthy_alarms']}/{len(h)} healthy runs  |  caught {summary['leaky_caught']}/{len(l)} leaky runs"
          f"   (old rule on RSS: {summary['old_rule_on_rss_healthy_alarms']}/{len(h)} false alarms, {summary['old_rule_on_rss_leaky_caught']}/{len(l)} caught)")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
