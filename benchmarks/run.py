"""Measure distlab's targets side by side in one run and report each as value, goal, met.

    python benchmarks/run.py [--json] [--repeats N] [--write BENCHMARKS.md] [--only-profile]

Targets (issue 3 and the design card):
- diagnosis latency: seconds from the moment a rank diverges to the watcher's diagnosis, world 4, gloo, defaults (<= 5 s)
- watch overhead: the ledger's cost on a DDP step in one process, watched vs unwatched (torch's own functions
  put back) in alternating blocks of steps (<= 2 %); the end-to-end ratio of two torchrun jobs (watched /
  unwatched) is reported beside it, with its spread, which on 2 shared cores is larger than the effect
- launcher wall time: `launch(watch=True)` wall time / bare torchrun's on the same script (<= 1.05x), 12 pairs in
  both orders, with the CPU seconds of the whole process tree beside it (steadier than wall time on 2 cores)
- communication profile overhead: `StepProfiler` on the watched DDP loop in each mode (light, buckets) against a
  plain copy of one model, alternating in one process (<= 3 %), at three step sizes (issue 8)
- `distlab bench` all_reduce busbw / a bare torchrun timing loop's, whole jobs and inside one job (within 5 %)
"""
import argparse, json, platform, re, resource, statistics, subprocess, sys, tempfile, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOOP = HERE / "ddp_loop.py"
sys.path.insert(0, str(HERE.parent))
from distlab.run.launch import launch  # noqa: E402

def _why(res) -> str:
    d = res.diagnosis
    return f"status {res.status}, failure {res.failure}, diagnosis {d.text()[:800] if d else None}, run dir {res.run_dir}"

def _stdout(run_dir) -> str:
    return "\n".join(p.read_text() for p in sorted(Path(run_dir, "logs").glob("rank*.stdout")))

def diagnosis_latency(how: str, root: Path, repeats: int, **config) -> list[float]:
    "Seconds from the divergence to the diagnosis, one per repeat; `config`: LaunchConfig fields (e.g. stall_policy)."
    out = []
    for _ in range(repeats):
        t_diag = {}
        run = launch(LOOP, ["--steps", "60", "--warmup", "5", "--width", "64", "--diverge-at", "20", "--how", how],
                     nproc=4, runs_root=root, timeout_s=120, on_diagnosis=lambda d: t_diag.setdefault("t", time.time()), **config)
        res = run.wait()
        m = re.search(r"DIVERGE_T (\S+)", _stdout(res.run_dir))
        if res.diagnosis is None or not m or "t" not in t_diag:
            raise RuntimeError(f"{how}: no diagnosis: {_why(res)}")
        out.append(round(t_diag["t"] - float(m.group(1)), 3))
    return out

def step_ms(watch: bool, root: Path) -> float:
    "Mean DDP step time across ranks (ms), watched or not."
    res = launch(LOOP, ["--steps", "300", "--warmup", "30"], nproc=2, runs_root=root, watch=watch, timeout_s=300).wait()
    vals = [float(v) for v in re.findall(r"STEP_MS (\S+)", _stdout(res.run_dir))]
    if res.status != "ok" or len(vals) != 2: raise RuntimeError(f"step run failed: {_why(res)}")
    return statistics.mean(vals)

def ledger_in_process() -> dict:
    "The ledger's cost per collective and per DDP step, recorded vs pass-through, in one process."
    out = subprocess.run([sys.executable, str(HERE / "ledger_inproc.py")], capture_output=True, text=True, timeout=900,
                         env={**__import__("os").environ, "PYTHONPATH": str(HERE.parent)})
    if out.returncode: raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])

def _tree_cpu_s() -> float:
    "CPU seconds (user + system) of this process and of every child it has waited for (torchrun, its ranks, the reaper)."
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

def wall_times(root: Path, ours_first: bool = False) -> tuple[tuple[float, float], tuple[float, float]]:
    "((wall s, CPU s) of bare torchrun, (wall s, CPU s) of distlab launch) for the same short script."
    args = ["--steps", "20", "--warmup", "2", "--width", "64"]
    def bare():
        t, c = time.perf_counter(), _tree_cpu_s()
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone", str(LOOP), *args],
                       check=True, capture_output=True, cwd=root)
        return time.perf_counter() - t, _tree_cpu_s() - c
    def ours():
        t, c = time.perf_counter(), _tree_cpu_s()
        res = launch(LOOP, args, nproc=2, runs_root=root, timeout_s=120).wait()
        if res.status != "ok": raise RuntimeError(f"launch failed: {_why(res)}")
        return time.perf_counter() - t, _tree_cpu_s() - c
    if ours_first: o = ours(); return bare(), o
    b = bare(); return b, ours()

def profile_in_process(loop: str, rounds: int) -> dict:
    "The communication profiler's cost on a watched DDP step in one process, every mode against plain copies, alternating."
    out = subprocess.run([sys.executable, str(HERE / "profile_inproc.py"), loop, "--rounds", str(rounds)], capture_output=True, text=True,
                         timeout=1800, env={**__import__("os").environ, "PYTHONPATH": str(HERE.parent)})
    if out.returncode: raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])

PROFILE_LOOPS = (("20ms", 40), ("5ms", 100), ("ledger", 100))  # step times the issue-8 loop is sized to here; ledger_inproc's loop

def _profile_loop_words(loop: str, p: dict) -> str:
    if loop == "ledger": return f"ledger_inproc's ~2.5 ms step ({p['step_ms_plain']} ms here)"
    return f"a ~{loop[:-2]} ms step (width {p['width']}, sized to it here: {p['step_ms_plain']} ms)"

def profile_rows() -> list[dict]:
    "Issue 8: StepProfiler's overhead in each mode (light: the default; buckets: per-bucket rows) at three step sizes, goal <= 3 %."
    rows = []
    for loop, rounds in PROFILE_LOOPS:
        p = profile_in_process(loop, rounds)
        what = _profile_loop_words(loop, p)
        for mode, how in (("light", "DDP's own timers, the default"), ("buckets", "a recording hook per bucket")):
            f = p[mode]
            rows.append({"target": f"communication profile overhead, mode={mode} ({how}), on the watched DDP loop, {what} "
                                   f"(world 1, gloo, {p['buckets_per_step']} buckets per step): modes and plain in alternating blocks, "
                                   f"median of paired ratios", "value": f["overhead_pct"], "unit": "%", "goal": "<= 3",
                         "met": f["overhead_pct"] <= 3, "samples": {**f, "step_ms_plain": p["step_ms_plain"], "calibration": p.get("calibration"), "hook_only": p["hook"], "control_plain2": p["plain2"],
                                                                   "load_avg": p["load_avg"]}})
    return rows

def bench_rows(repeats: int) -> list[dict]:
    sys.path.insert(0, str(HERE))
    import bench_busbw
    return [bench_busbw.measure(repeats=repeats), bench_busbw.measure_paired()]

def trainer_rows() -> list[dict]:
    "DDPTrainer throughput against a hand-written DDP loop, alternating blocks in one job (issue 9)."
    sys.path.insert(0, str(HERE))
    from trainer_throughput import measure as trainer_measure
    r = trainer_measure([])
    return [{"target": f"DDPTrainer throughput / hand-written DDP loop (world {r['world']}, gloo, StepProfiler on; "
                       f"{r['ratio_unprofiled']}x with it off)", "value": r["ratio"], "unit": "x", "goal": ">= 0.97",
             "met": r["ratio"] >= 0.97, "samples": r}]

def measure(repeats: int) -> list[dict]:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        stall = diagnosis_latency("stall", root, repeats)
        asleep_strict = diagnosis_latency("sleep", root, repeats, stall_policy="strict")
        asleep_safe = diagnosis_latency("sleep", root, 1)
        mismatch = diagnosis_latency("mismatch", root, repeats)
        on, off = [], []
        for _ in range(repeats):  # interleaved, so drift in machine load hits both sides alike
            off.append(step_ms(False, root)); on.append(step_ms(True, root))
        walls = [wall_times(root, ours_first=i % 2 == 1) for i in range(4 * repeats)]  # both orders alike; single walls spread ~30 %
    inproc = ledger_in_process()
    overhead = statistics.median(on) / statistics.median(off) - 1
    wall_ratio = statistics.median(o[0] for _, o in walls) / statistics.median(b[0] for b, _ in walls)
    cpu_ratio = statistics.median(o[1] for _, o in walls) / statistics.median(b[1] for b, _ in walls)
    return [
        {"target": "diagnosis latency, stall: a rank deadlocked on a lock in user code (world 4, gloo, stall_after_s=3, default safe policy)",
         "value": max(stall), "unit": "s", "goal": "<= 5", "met": max(stall) <= 5, "samples": stall},
        {"target": "diagnosis latency, stall: a rank asleep in user code, strict policy (world 4, gloo, stall_after_s=3)",
         "value": max(asleep_strict), "unit": "s", "goal": "<= 5", "met": max(asleep_strict) <= 5, "samples": asleep_strict},
        {"target": "(context) the same asleep rank under the default safe policy, which gives sleep or I/O 30 s before calling it a stall",
         "value": max(asleep_safe), "unit": "s", "goal": "30-35", "met": 30 <= max(asleep_safe) <= 35, "samples": asleep_safe},
        {"target": "diagnosis latency, mismatch (world 4, gloo)", "value": max(mismatch), "unit": "s",
         "goal": "<= 5", "met": max(mismatch) <= 5, "samples": mismatch},
        {"target": "watch overhead on a DDP step (2.5 ms, world 1, gloo): watched vs unwatched blocks alternating in one process, median of paired ratios",
         "value": inproc["ddp_step_overhead_pct"], "unit": "%", "goal": "<= 2", "met": inproc["ddp_step_overhead_pct"] <= 2,
         "samples": inproc},
        {"target": "(context) DDP step time, torchrun watched / unwatched - 1 (world 2; noise larger than the effect)",
         "value": round(100 * overhead, 2), "unit": "%", "goal": "<= 2", "met": overhead <= 0.02,
         "samples": {"watched_ms": [round(v, 3) for v in on], "unwatched_ms": [round(v, 3) for v in off]}},
        {"target": "launcher wall time / bare torchrun (world 2, watched)", "value": round(wall_ratio, 3), "unit": "x",
         "goal": "<= 1.05", "met": wall_ratio <= 1.05, "samples": [[round(b[0], 2), round(o[0], 2)] for b, o in walls]},
        {"target": "(context) the same pairs' CPU seconds, the whole process tree (launcher, reaper, torchrun, ranks): launch / bare",
         "value": round(cpu_ratio, 3), "unit": "x", "goal": "<= 1.05", "met": cpu_ratio <= 1.05,
         "samples": [[round(b[1], 2), round(o[1], 2)] for b, o in walls]},
    ]

def markdown(rows: list[dict], cmd: str) -> str:
    lines = ["# Benchmarks", "", f"Measured with `{cmd}` on {platform.machine()}, {platform.python_version()}, "
             f"{time.strftime('%Y-%m-%d')}; each figure is a ratio or a latency measured side by side in one run.", "",
             "| target | value | goal | met | samples |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['target']} | {r['value']} {r['unit']} | {r['goal']} {r['unit']} | {'yes' if r['met'] else 'NO'} | `{json.dumps(r['samples'])}` |")
    return "\n".join(lines) + "\n"

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true"); ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--write", default=None, help="write the table to this markdown file")
    ap.add_argument("--only-profile", action="store_true", help="measure only the communication profile rows (issue 8); prints them")
    a = ap.parse_args()
    if a.only_profile:
        rows = profile_rows(); print(json.dumps(rows, indent=1) if a.json else markdown(rows, "python benchmarks/run.py --only-profile")); sys.exit(0)
    rows = measure(a.repeats) + profile_rows() + bench_rows(a.repeats) + trainer_rows()
    if a.write:  # the table and its "### About this run" notes are replaced; every "## " section after them is kept
        out = Path(a.write)
        text = out.read_text() if out.exists() else ""
        at = text.find("\n## ")
        out.write_text(markdown(rows, "python benchmarks/run.py " + " ".join(sys.argv[1:])) + (text[at:] if at >= 0 else ""))
    print(json.dumps(rows, indent=1) if a.json else markdown(rows, "python benchmarks/run.py"))
