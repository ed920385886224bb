"""Emulated nodes on one machine (root): `distlab bench` across 2 nodes as a fraction of the kernel-shaped link's rate,
and the slow-link scenario over a 1 Gbit/s tbf link, broken (float32) beside its fixes (bf16, accumulation), as
seconds per sample and ratios. Needs a quiet machine for figures to quote.
    python benchmarks/emulated_nodes.py [--rates 200,1000] [--json OUT]"""
import argparse, json, sys, tempfile, time
from distlab.run.nodes import NodeSpec, missing_privileges
from distlab.run.node_jobs import bench_nodes
from distlab.scenarios.on_nodes import slow_link_on_nodes

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="200,1000", help="link rates to bench, Mbit/s")
    ap.add_argument("--no-slow-link", action="store_true")
    ap.add_argument("--json", default=None, help="write the figures here")
    a = ap.parse_args(argv)
    if (why := missing_privileges()) is not None: sys.exit(f"skipped: {why}")
    out = {"bench": {}, "slow_link": None}
    root = tempfile.mkdtemp(prefix="distlab-nodes-bench-")
    for rate in [float(r) for r in a.rates.split(",")]:
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
    if a.json: open(a.json, "w").write(json.dumps(out, indent=1, default=str))

if __name__ == "__main__": main()
