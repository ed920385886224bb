"""Emulated nodes on one machine (root): `distlab bench` across 2 nodes as a fraction of the kernel-shaped link's rate,
and the slow-link scenario over a 1 Gbit/s tbf link, broken (float32) beside its fixes (bf16, accumulation), as
seconds per sample and ratios; 2 nodes of 2 ranks with DDP's flat ring against summing inside each node first
(hierarchical_hook) on each of --hierarchical's rates; with --watch N, the cross-node watch's time to diagnosis (a mismatch and a deadlock
whose culprit runs on node 1, node 1's launcher killed, node 1's link down), N rounds of each, and the bytes a node
sends per look. Needs a quiet machine for figures to quote.
    python benchmarks/emulated_nodes.py [--rates 200,1000] [--no-slow-link] [--hierarchical 1000,200] [--watch N] [--json OUT]"""
import argparse, json, os, signal, statistics, subprocess, sys, tempfile, time
from pathlib import Path
from distlab.run.nodes import NodeSpec, missing_privileges
from distlab.run.node_jobs import bench_nodes
from distlab.scenarios.on_nodes import slow_link_on_nodes

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="200,1000", help="link rates to bench, Mbit/s")
    ap.add_argument("--no-slow-link", action="store_true")
    ap.add_argument("--hierarchical", default="1000,200", help="link rates (Mbit/s) for the flat ring against summing inside each node first, 2 ranks a node ('' for none)")
    ap.add_argument("--watch", type=int, default=0, help="rounds of the cross-node watch's time to diagnosis (0: none)")
    ap.add_argument("--json", default=None, help="write the figures here")
    a = ap.parse_args(argv)
    if (why := missing_privileges()) is not None: sys.exit(f"skipped: {why}")
    out = {"bench": {}, "slow_link": None}
    root = tempfile.mkdtemp(prefix="distlab-nodes-bench-")
    if a.watch: out["watch"] = watch_rounds(a.watch, root)
    for rate in [float(r) for r in a.rates.split(",") if r]:
        t = time.time()
        b = bench_nodes("all_reduce", node=NodeSpec(link_mbit=rate), minbytes="1M", maxbytes="16M", iters=5, warmup=1,
                        copy_bytes=0, runs_root=root)
        link_gbps = rate / 8e3
        out["bench"][rate] = [{"size": r.size_bytes, "busbw_gbps": r.busbw_gbps, "of_link": r.busbw_gbps / link_gbps} for r in b.rows]
        print(f"bench {rate:g} Mbit/s ({time.time() - t:.0f} s): " +
              ", ".join(f"{r['size'] >> 20} MiB {r['busbw_gbps']:.4f} GB/s = {r['of_link']:.3f} of the link" for r in out["bench"][rate]), flush=True)
    if not a.no_slow_link:
        sl = out["slow_link"] = slow_link_on_nodes(("broken", "fixed", "fixed-accumulate"), runs_root=root)
        print(f"slow-link over {sl['link_mbit']:g} Mbit/s (float32 wire floor {sl['fp32_link_floor_s'] * 1e3:.1f} ms/step):")
        for v in ("broken", "fixed", "fixed-accumulate"):
            f = sl[v]
            print(f"  {v:17} {f['status']:4} {f['bytes_per_step']} B/step, {f['samples_per_step']} samples, step {f['step_s'] * 1e3:.1f} ms, "
                  f"{f['s_per_sample'] * 1e3:.2f} ms/sample, comm wait {f['comm_wait_s'] * 1e3:.1f} ms, "
                  f"speed-up per sample x{f.get('speedup_per_sample', float('nan')):.2f}")
    for rate in [float(r) for r in a.hierarchical.split(",") if r]:  # summing inside each node first, 2 ranks a node
        h = out.setdefault("hierarchical", {})[rate] = slow_link_on_nodes(("broken", "fixed-hierarchical"), nproc=2, link_mbit=rate, runs_root=root)
        print(f"2 nodes x 2 ranks over {rate:g} Mbit/s (flat ring floor {h['fp32_link_floor_s'] * 1e3:.1f} ms/step): " +
              ", ".join(f"{v} {h[v]['status']} step {h[v]['step_s'] * 1e3:.1f} ms x{h[v].get('speedup_per_sample', float('nan')):.2f}"
                        for v in ("broken", "fixed-hierarchical")), flush=True)
    if a.json: open(a.json, "w").write(json.dumps(out, indent=1, default=str))

SCRIPT = Path(__file__).resolve().parent.parent / "tests" / "scripts" / "cross_node_job.py"

def _one(kind: str, root: str) -> dict:
    "One 2-node job of tests/scripts/cross_node_job.py with its fault; seconds from the fault to node 0's diagnosis."
    from distlab.run.node_jobs import launch_nodes
    from distlab.watch.analysis import analyze_run
    ready, fault = [], {}
    def on_line(node, rank, stream, line):
        if line.startswith("step 2"): ready.append(node)
    mode = {"mismatch": "mismatch", "deadlock": "lock"}.get(kind, "forever")
    job = launch_nodes(SCRIPT, [mode], nnodes=2, nproc=1, runs_root=root, timeout_s=150, on_line=on_line)
    try:
        if kind in ("killed", "link-down"):
            while len(ready) < 2 and not job.done: time.sleep(0.05)
            fault["t"] = time.time()
            if kind == "killed": os.kill(job._procs[1].pid, signal.SIGKILL)
            else: subprocess.run(["ip", "-n", job.cluster.nodes[1].netns, "link", "set", "eth0", "down"], check=True)
        res = job.wait(120)
    finally: res = job.stop()
    n0 = next(n for n in res.nodes if n["hostname"] == "node0")
    d = n0.get("diagnosis") or {}
    if kind in ("mismatch", "deadlock"):  # from the moment the hang began: the culprit's barrier, or the others' wait
        tracks = {r: t for n in res.nodes for r, t in analyze_run(n["run_dir"], 2, diagnose=False).tracks.items() if t.pid}
        if kind == "mismatch": fault["t"] = min(p["t0"] for t in tracks.values() for p in t.pairs if p["op"] == "barrier")
        else: fault["t"] = max(p["t0"] for t in tracks.values() for p in t.pairs if p["seq"] == max(q["seq"] for q in t.pairs))
    hub = json.loads(Path(n0["run_dir"], "cross_node.json").read_text()) if Path(n0["run_dir"], "cross_node.json").exists() else {}
    per_look = [n["bytes"] / n["looks"] for n in hub.get("nodes", []) if n.get("looks")]
    return {"kind": kind, "diagnosis": d.get("kind"), "after_s": round(d["t"] - fault["t"], 2) if d.get("t") and fault.get("t") else None,
            "bytes_per_look": round(per_look[0]) if per_look else None, "left": res.left}

def watch_rounds(n: int, root: str) -> dict:
    "`n` rounds of each fault; per fault its diagnoses and seconds to them (min, median, max)."
    out = {}
    for kind in ("mismatch", "deadlock", "killed", "link-down"):
        rows = [_one(kind, root) for _ in range(n)]
        secs = [r["after_s"] for r in rows if r["after_s"] is not None]
        out[kind] = {"rows": rows, "min_s": min(secs, default=None), "median_s": statistics.median(secs) if secs else None,
                     "max_s": max(secs, default=None)}
        print(f"watch {kind:9}: {[r['diagnosis'] for r in rows]}, diagnosed after {secs} s, "
              f"{[r['bytes_per_look'] for r in rows]} B a look from node 1", flush=True)
    return out

if __name__ == "__main__": main()
