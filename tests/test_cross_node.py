"""One watch across emulated nodes (needs root), two 2-node jobs run at once: node 0's launcher diagnoses a hang
whose culprit runs on node 1 (node, host, global rank and line in one diagnosis, which node 1 gets too); a node
whose launcher was killed is named within seconds, where each node alone would wait for gloo's 30-minute timeout.
The lessons' faults between nodes (a link that goes down, a firewall that passes only the rendezvous port, a
hostname that resolves to loopback; `distlab.scenarios.on_nodes.NODE_FAULTS`) run once, broken and fixed, in
examples/07_multi_node.ipynb, whose hidden `ci` cells assert what this file asserted of them (tests/test_walkthroughs.py -k 07)."""
import os, signal, threading, time
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

def _kill_node1(tmp: Path, out: dict):
    "Start the endless job, SIGKILL node 1's launcher once both nodes train, and record when."
    steps = []
    job = launch_nodes(SCRIPT, ["forever"], nnodes=2, nproc=1, runs_root=tmp, timeout_s=150,
                       on_line=lambda node, rank, stream, line: steps.append(node) if line.startswith("step 2") else None)
    try:
        wait_for(lambda: len(steps) == 2, 120, interval_s=0.2, what="both nodes training")
        out["killed_t"] = time.time()
        os.kill(job._procs[1].pid, signal.SIGKILL)  # node 1's launcher, as a host that dies takes it
        out["res"] = job.wait(60)
    finally:
        out["res"] = job.stop()

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    "The two jobs at once (they spend most of their time waiting on each other's nodes, not on the CPU)."
    tmp = tmp_path_factory.mktemp("cross_node")
    mismatch = launch_nodes(SCRIPT, ["mismatch"], nnodes=2, nproc=1, runs_root=tmp, timeout_s=150)
    kill: dict = {}
    killer = threading.Thread(target=_kill_node1, args=(tmp, kill)); killer.start()
    out = {"mismatch": mismatch.wait()}
    killer.join(200)
    for k, v in out.items(): print(f"{k}: {v.duration_s:.1f} s")
    return out | {"kill": kill}

def test_hang_on_node1_diagnosed_from_node0(runs):
    res = runs["mismatch"]
    n0, n1 = node_of(res, "node0"), node_of(res, "node1")
    d = n0["diagnosis"]
    assert res.status == "hung" and d and d["kind"] == "mismatch", res.text()
    culprit = int(next(r for r, s in d["ranks"].items() if s.get("node_host") == "node1"))
    assert d["culprit_ranks"] == [culprit], d["headline"]
    assert f"cross_node_job.py:{BARRIER_LINE}" in d["headline"] and f"rank {culprit} on node 1 (host node1)" in d["headline"], d["headline"]
    assert d["collective"]["diagnosed_on"] == {"node": 0, "host": "node0"}, d["collective"]
    assert n1["diagnosis"]["headline"] == d["headline"]  # node 1 stopped with the hub's verdict, not its own half view
    t = analyze_run(n1["run_dir"], 2, diagnose=False).tracks[culprit]
    took_s = d["t"] - next(p["t0"] for p in t.pairs if p["op"] == "barrier")
    print(f"mismatch across nodes diagnosed {took_s:.2f} s after the culprit's barrier")
    assert took_s <= 1.0, took_s
    assert res.left == {}

def test_killed_node_named_within_seconds(runs):
    res, killed_t = runs["kill"]["res"], runs["kill"]["killed_t"]
    d = node_of(res, "node0")["diagnosis"]
    assert d and d["kind"] == "node-lost" and d["collective"]["how"] == "closed", res.text()
    assert d["collective"]["host"] == "node1" and d["collective"]["node"] == 1 and "node 1 (host node1" in d["headline"], d
    took_s = d["t"] - killed_t
    print(f"killed node named {took_s:.2f} s after the kill")
    assert took_s <= 10.0, took_s
    assert res.left == {}

def test_doctor_on_node1_names_its_loopback_hostname():
    "Before any job: `distlab doctor` on the node whose hosts file maps its name to 127.0.1.1, with the master elsewhere."
    import subprocess, sys
    from distlab.run.nodes import EmulatedCluster, NETNS_ETC
    from distlab.scenarios.on_nodes import loopback_hosts_text
    with EmulatedCluster(2) as c:
        (NETNS_ETC / c.nodes[1].netns / "hosts").write_text(loopback_hosts_text(c))
        lines = {}
        for i in (0, 1):
            p = c.popen(i, ["env", "MASTER_ADDR=node0", sys.executable, "-m", "distlab.cli", "doctor"], stdout=subprocess.PIPE, text=True)
            lines[i] = next((l for l in p.communicate(timeout=100)[0].splitlines() if " hostname " in f" {l} "), "")
    assert lines[1].startswith("WARN") and "node1 resolves to 127.0.1.1" in lines[1], lines
    assert lines[0] == "", lines  # node 0 is the master itself: no such check there
