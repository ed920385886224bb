"""How often a lossy link is taken for a hang: `node-lossy-link`'s broken setup (2 emulated nodes, node 1 dropping each
packet in or out with probability P) run RUNS times, PARALLEL at once, each watched across the nodes as the lesson is.

A run that ends `ok` is the watch's right answer: TCP delivers everything in the end, the job finishes. A run that ends
`hung` names what the watch took for a hang (its kind and headline), and `wire_ms` is the DDP all-reduce after the
last rank arrived (median, 90th percentile, max), so a long run of losses shows next to the verdict. Needs root (network
namespaces, iptables).

Usage: python benchmarks/lossy_link_alarms.py [--p 0.1] [--runs 16] [--parallel 4]
Prints a line per run and a JSON summary. The lesson's own P is `distlab.scenarios.on_nodes.LOSS_P` (0.1)."""
import argparse, json, sys, tempfile, time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import distlab.scenarios.on_nodes as on

ap = argparse.ArgumentParser()
ap.add_argument("--p", type=float, default=on.LOSS_P, help="each packet's chance of being dropped, each way")
ap.add_argument("--runs", type=int, default=16)
ap.add_argument("--parallel", type=int, default=4, help="clusters at once (the test fixture runs 6 network runs at once)")
a = ap.parse_args()
on.loss_commands.__defaults__ = (a.p, 1)  # fault_setup calls it with the default probability

root, rows, t0 = Path(tempfile.mkdtemp(prefix="lossy-")), [], time.time()
while len(rows) < a.runs:
    jobs = [on.start_fault("node-lossy-link", "broken", runs_root=root, timeout_s=150, join_timeout_s=45)
            for _ in range(min(a.parallel, a.runs - len(rows)))]
    try:
        for j in jobs:
            r = on.fault_result(*j)
            d = r["diagnosis"] or {}
            row = {"status": r["status"], "s": round(r["cluster"].duration_s, 1), "kind": d.get("kind"),
                   "headline": (d.get("headline") or "")[:240], "wire_ms": r["figures"].get("wire_ms")}
            rows.append(row); print(json.dumps(row), flush=True)
    finally:
        for job, _ in jobs: job.stop()
hung = [r for r in rows if r["status"] != "ok"]
print(json.dumps({"p": a.p, "runs": len(rows), "parallel": a.parallel, "ok": len(rows) - len(hung),
                  "not_ok": dict(Counter(f"{r['status']}:{r['kind']}" for r in hung)),
                  "max_wire_ms": max((r["wire_ms"] or {}).get("max", 0) for r in rows), "wall_s": round(time.time() - t0)}))
