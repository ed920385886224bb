"""One watch across emulated nodes (needs root): node 0's launcher diagnoses a hang whose culprit runs on node 1
(node, host, global rank and line in one diagnosis, which node 1 gets too), and names a node whose launcher was
killed within seconds, where each node alone would have waited for gloo's 30-minute timeout."""
import json, os, signal, time
from pathlib import Path
import pytest
from helpers import wait_for
from distlab.run.nodes import missing_privileges
from distlab.run.node_jobs import launch_nodes
from distlab.watch.analysis import analyze_run

MISSING = missing_privileges(["cpu"])
pytestmark = [pytest.mark.skipif(MISSING is not None, reason=MISSING or ""), pytest.mark.slow]
SCRIPT = Path(__file__).parent / "scripts" / "cross_node_job.py"
BARRIER_LINE = next(i for i, l in enumerate(SCRIPT.read_text().splitlines(), 1) if "dist.barrier()" in l)

def node_of(res, hostname: str) -> dict:
    return next(n for n in res.nodes if n["hostname"] == hostname)

def test_hang_on_node1_diagnosed_from_node0(tmp_path):
    res = launch_nodes(SCRIPT, ["mismatch"], nnodes=2, nproc=1, runs_root=tmp_path, timeout_s=150).wait()
    n0, n1 = node_of(res, "node0"), node_of(res, "node1")
    d = n0["diagnosis"]
    assert res.status == "hung" and d and d["kind"] == "mismatch", res.text()
    culprit = int(next(r for r, s in d["ranks"].items() if s.get("node_host") == "node1"))
    assert d["culprit_ranks"] == [culprit], d["headline"]
    assert f"cross_node_job.py:{BARRIER_LINE}" in d["headline"] and f"rank {culprit} on node 1 (host node1)" in d["headline"], d["headline"]
    assert d["collective"]["diagnosed_on"] == {"node": 0, "host": "node0"}, d["collective"]
    assert n1["diagnosis"]["headline"] == d["headline"]  # node 1 stopped with the hub's verdict, not its own half view
    t = analyze_run(n1["run_dir"], 2, diagnose=False).tracks[culprit]
    barrier_t = next(p["t0"] for p in t.pairs if p["op"] == "barrier")
    took_s = d["t"] - barrier_t
    print(f"mismatch across nodes diagnosed {took_s:.2f} s after the culprit's barrier")
    assert took_s <= 1.0, took_s
    assert res.left == {}

def test_killed_node_named_within_seconds(tmp_path):
    steps = []
    job = launch_nodes(SCRIPT, ["forever"], nnodes=2, nproc=1, runs_root=tmp_path, timeout_s=150,
                       on_line=lambda node, rank, stream, line: steps.append(node) if line.startswith("step 2") else None)
    try:
        wait_for(lambda: len(steps) == 2, 120, interval_s=0.2, what="both nodes training")
        killed_t = time.time()
        os.kill(job._procs[1].pid, signal.SIGKILL)  # node 1's launcher, as a host that dies takes it
        res = job.wait(60)
    finally:
        job.stop()
    d = node_of(res, "node0")["diagnosis"]
    assert d and d["kind"] == "node-lost", res.text()
    assert d["collective"]["host"] == "node1" and d["collective"]["node"] == 1 and "node 1 (host node1" in d["headline"], d
    took_s = d["t"] - killed_t
    print(f"killed node named {took_s:.2f} s after the kill")
    assert took_s <= 10.0, took_s
    assert res.left == {}
