"""`distlab bench` against a bare timing loop: all_reduce busbw of both, side by side in one run (issue 8's target:
within 5 %).

    python benchmarks/bench_busbw.py [--repeats 3] [--nproc 2] [--maxbytes 16777216] [--json]

Both sides are whole torchrun jobs on the same sizes, iterations and formula: `distlab.run.bench.bench` (launch,
`distlab.rank.bench`, the table) and benchmarks/bare_allreduce.py (a hand-written loop with no distlab at all).
They alternate, in both orders, `repeats` times each; per size the ratio is distlab's median busbw over the bare
loop's, and the figure is the median of those ratios. `measure()` returns that as a row of benchmarks/run.py's table."""
import argparse, json, statistics, subprocess, sys, tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from distlab.run.bench import bench, size_sweep  # noqa: E402

def bare(sizes: list[int], nproc: int, iters: int, warmup: int, cwd: Path) -> dict[int, float]:
    "busbw (GB/s) per size from the bare loop."
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
                        str(HERE / "bare_allreduce.py"), "--sizes", ",".join(map(str, sizes)), "--iters", str(iters),
                        "--warmup", str(warmup)], capture_output=True, text=True, timeout=600, cwd=cwd)
    if p.returncode: raise RuntimeError(f"bare loop failed: {p.stderr[-2000:]}")
    out = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("{")][-1])
    return {r["size_bytes"]: r["busbw_gbps"] for r in out["rows"]}

def ours(sizes: list[int], nproc: int, iters: int, warmup: int, root: Path) -> dict[int, float]:
    "busbw (GB/s) per size from `distlab bench` (all_reduce only; no memcpy reference, as the bare loop has none)."
    res = bench(["all_reduce"], nproc=nproc, backend="gloo", minbytes=sizes[0], maxbytes=sizes[-1], stepfactor=sizes[1] // sizes[0],
                iters=iters, warmup=warmup, copy_bytes=0, runs_root=root)
    assert all(r.wrong == 0 for r in res.rows), [r.wrong for r in res.rows]
    return {r.size_bytes: r.busbw_gbps for r in res.rows}

def measure(repeats: int = 3, nproc: int = 2, minbytes: int = 8, maxbytes: int = 16 * 2**20, stepfactor: int = 8,
            iters: int = 20, warmup: int = 5) -> dict:
    "A benchmarks/run.py row: median over sizes of distlab bench's busbw / the bare loop's."
    sizes = size_sweep(minbytes, maxbytes, stepfactor)
    samples = {"distlab": {s: [] for s in sizes}, "bare": {s: [] for s in sizes}}
    with tempfile.TemporaryDirectory() as d:
        for i in range(repeats):  # both sides each round, the order alternating: drift in the machine's load hits both alike
            for side in (("distlab", "bare") if i % 2 == 0 else ("bare", "distlab")):
                got = (ours if side == "distlab" else bare)(sizes, nproc, iters, warmup, Path(d))
                for s in sizes: samples[side][s].append(got[s])
    ratios = {s: statistics.median(samples["distlab"][s]) / statistics.median(samples["bare"][s]) for s in sizes}
    med = statistics.median(ratios.values())
    return {"target": f"distlab bench all_reduce busbw / a bare torchrun timing loop (world {nproc}, gloo), median over sizes",
            "value": round(med, 3), "unit": "x", "goal": "0.95-1.05", "met": abs(med - 1) <= 0.05,
            "samples": {"ratio_per_size": {str(s): round(r, 3) for s, r in ratios.items()},
                        "busbw_gbps": {side: {str(s): [round(v, 4) for v in vals] for s, vals in per.items()}
                                       for side, per in samples.items()}}}

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3); ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--maxbytes", type=int, default=16 * 2**20); ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    row = measure(a.repeats, a.nproc, maxbytes=a.maxbytes)
    if a.json: print(json.dumps(row, indent=1))
    else:
        print(f"{row['target']}: {row['value']}x (goal {row['goal']}, {'met' if row['met'] else 'NOT met'})")
        print("size (B)      ratio   distlab busbw (GB/s)        bare busbw (GB/s)")
        for s, r in row["samples"]["ratio_per_size"].items():
            o, b = row["samples"]["busbw_gbps"]["distlab"][s], row["samples"]["busbw_gbps"]["bare"][s]
            print(f"{s:>10}  {r:>7.3f}   {o}   {b}")
