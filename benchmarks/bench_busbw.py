"""`distlab bench` against a bare timing loop: all_reduce busbw of both, side by side in one run (issue 8's target:
within 5 %).

    python benchmarks/bench_busbw.py [--repeats 5] [--nproc 2] [--maxbytes 16777216] [--json]

`measure()`: both sides are whole torchrun jobs on the same sizes, iterations and formula: `distlab.run.bench.bench`
(launch, `distlab.rank.bench`, the table) and benchmarks/bare_allreduce.py (a hand-written loop, no distlab). Each
round runs both, the order alternating; per size the ratio is the median over rounds of distlab's busbw / the bare
loop's in the same round, and the figure is the median of those ratios over sizes.

`measure_paired()`: whole jobs on 2 shared cores vary by several times from one run to the next, so the same two
loops (distlab's rank code and the hand-written one) are also timed in alternating blocks inside one torchrun job,
where every pair shares the machine's load, each block at least 50 ms long (more than 50 calls at small sizes).
The two loops run the same calls, so the ratio's spread is the machine's: at latency-bound sizes single pairs still
differ by 0.4-2.5x on 2 shared cores, at 16 MiB by about 10 %. Each returns one row of benchmarks/run.py's table."""
import argparse, json, os, statistics, subprocess, sys, tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from distlab.run.bench import bench, size_sweep  # noqa: E402

def _torchrun(sizes: list[int], nproc: int, iters: int, warmup: int, cwd: Path, *extra: str) -> list[dict]:
    "Rows printed by benchmarks/bare_allreduce.py under bare torchrun."
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
                        str(HERE / "bare_allreduce.py"), "--sizes", ",".join(map(str, sizes)), "--iters", str(iters),
                        "--warmup", str(warmup), *extra], capture_output=True, text=True, timeout=600, cwd=cwd,
                       env={**os.environ, "PYTHONPATH": str(HERE.parent)})
    if p.returncode: raise RuntimeError(f"bare loop failed: {p.stderr[-2000:]}")
    return json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("{")][-1])["rows"]

def bare(sizes: list[int], nproc: int, iters: int, warmup: int, cwd: Path) -> dict[int, float]:
    "busbw (GB/s) per size from the bare loop."
    return {r["size_bytes"]: r["busbw_gbps"] for r in _torchrun(sizes, nproc, iters, warmup, cwd)}

def ours(sizes: list[int], nproc: int, iters: int, warmup: int, root: Path) -> dict[int, float]:
    "busbw (GB/s) per size from `distlab bench` (all_reduce only; no memcpy reference, as the bare loop has none)."
    res = bench(["all_reduce"], nproc=nproc, backend="gloo", minbytes=sizes[0], maxbytes=sizes[-1], stepfactor=sizes[1] // sizes[0],
                iters=iters, warmup=warmup, copy_bytes=0, runs_root=root)
    assert all(r.wrong == 0 for r in res.rows), [r.wrong for r in res.rows]
    return {r.size_bytes: r.busbw_gbps for r in res.rows}

def measure(repeats: int = 3, nproc: int = 2, minbytes: int = 8, maxbytes: int = 16 * 2**20, stepfactor: int = 8,
            iters: int = 50, warmup: int = 5) -> dict:
    "A benchmarks/run.py row: median over sizes of distlab bench's busbw / the bare loop's."
    sizes = size_sweep(minbytes, maxbytes, stepfactor)
    samples = {"distlab": {s: [] for s in sizes}, "bare": {s: [] for s in sizes}}
    with tempfile.TemporaryDirectory() as d:
        for i in range(repeats):  # both sides each round, the order alternating: drift in the machine's load hits both alike
            for side in (("distlab", "bare") if i % 2 == 0 else ("bare", "distlab")):
                got = (ours if side == "distlab" else bare)(sizes, nproc, iters, warmup, Path(d))
                for s in sizes: samples[side][s].append(got[s])
    paired = {s: [o / b for o, b in zip(samples["distlab"][s], samples["bare"][s])] for s in sizes}  # same round, same load
    ratios = {s: statistics.median(v) for s, v in paired.items()}
    med = statistics.median(ratios.values())
    big = [r for s, r in ratios.items() if s >= 256 * 2**10]  # bandwidth-bound sizes, where busbw means most
    return {"target": f"distlab bench all_reduce busbw / a bare torchrun timing loop (world {nproc}, gloo), median over sizes "
                      "of the median paired ratio",
            "value": round(med, 3), "unit": "x", "goal": "0.95-1.05", "met": abs(med - 1) <= 0.05,
            "samples": {"ratio_per_size": {str(s): round(r, 3) for s, r in ratios.items()},
                        "median_ratio_sizes_from_256KiB": round(statistics.median(big), 3) if big else None,
                        "paired_ratios": {str(s): [round(x, 3) for x in v] for s, v in paired.items()},
                        "busbw_gbps": {side: {str(s): [round(v, 5) for v in vals] for s, vals in per.items()}
                                       for side, per in samples.items()}}}

def measure_paired(rounds: int = 15, nproc: int = 2, minbytes: int = 8, maxbytes: int = 16 * 2**20, stepfactor: int = 8,
                   iters: int = 50, warmup: int = 5) -> dict:
    "A benchmarks/run.py row: distlab bench's rank-side timing / the bare loop's, in alternating blocks inside one torchrun job."
    sizes = size_sweep(minbytes, maxbytes, stepfactor)
    with tempfile.TemporaryDirectory() as d:
        rows = _torchrun(sizes, nproc, iters, warmup, Path(d), "--paired", str(rounds))
    # busbw is S / t x factor on both sides, so busbw(distlab) / busbw(bare) = t(bare) / t(distlab)
    paired = {r["size_bytes"]: [b / o for o, b in zip(r["distlab_s"], r["bare_s"])] for r in rows}
    ratios = {s: statistics.median(v) for s, v in paired.items()}
    med = statistics.median(ratios.values())
    return {"target": f"distlab bench's rank timing vs a bare loop, alternating blocks in one torchrun job (world {nproc}, gloo): "
                      "busbw ratio, median over sizes",
            "value": round(med, 3), "unit": "x", "goal": "0.95-1.05", "met": abs(med - 1) <= 0.05,
            "samples": {"ratio_per_size": {str(s): round(r, 3) for s, r in ratios.items()},
                        "paired_ratios": {str(s): [round(x, 3) for x in v] for s, v in paired.items()}}}

def _print(row: dict):
    print(f"{row['target']}: {row['value']}x (goal {row['goal']}, {'met' if row['met'] else 'NOT met'})")
    smp = row["samples"]
    if smp.get("median_ratio_sizes_from_256KiB") is not None: print(f"  median ratio, sizes >= 256 KiB: {smp['median_ratio_sizes_from_256KiB']}")
    print(f"  {'size (B)':>10}  {'ratio':>6}  paired ratios (distlab / bare busbw, one per round)")
    for s, r in smp["ratio_per_size"].items(): print(f"  {s:>10}  {r:>6.3f}  {smp['paired_ratios'][s]}")

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5); ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--maxbytes", type=int, default=16 * 2**20); ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = [measure(a.repeats, a.nproc, maxbytes=a.maxbytes), measure_paired(3 * a.repeats, a.nproc, maxbytes=a.maxbytes)]
    if a.json: print(json.dumps(rows, indent=1))
    else:
        for row in rows: _print(row)
