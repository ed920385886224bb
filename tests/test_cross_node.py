"""One watch across emulated nodes (needs root), five 2-node jobs run at once: node 0's launcher diagnoses a hang
whose culprit runs on node 1 (node, host, global rank and line in one diagnosis, which node 1 gets too); a node
whose launcher was killed and a node whose link went down are named within seconds, where each node alone would
wait for gloo's 30-minute timeout; a firewall that passes only the rendezvous port and a hostname that resolves to
loopback on node 1 are told apart (the lessons' setups, `distlab.scenarios.on_nodes.NODE_FAULTS`)."""
import os, shutil, signal, threading, time
from pathlib import Path
import pytest
from helpers import wait_for
from distlab.run.nodes import missing_privileges
from distlab.run.node_jobs import launch_nodes
from distlab.scenarios.on_nodes import start_fault, fault_result
from distlab.watch.analysis import analyze_run

MISSING = missing_privileges(["cpu"])
pytestmark = [pytest.mark.skipif(MISSING is not None, reason=MISSING or ""), pytest.mark.slow]
NO_IPTABLES = None if shutil.which("iptables") else "the firewall lesson needs iptables in the nodes' namespaces (apt-get install iptables)"
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
    "The five jobs at once (they spend most of their time waiting on each other's nodes, not on the CPU)."
    tmp = tmp_path_factory.mktemp("cross_node")
    mismatch = launch_nodes(SCRIPT, ["mismatch"], nnodes=2, nproc=1, runs_root=tmp, timeout_s=150)
    ids = ("node-loopback-hostname", "node-partition") + (() if NO_IPTABLES else ("node-firewall",))
    faults = {id: start_fault(id, "broken", runs_root=tmp, join_timeout_s=12) for id in ids}
    kill: dict = {}
    killer = threading.Thread(target=_kill_node1, args=(tmp, kill)); killer.start()
    out = {"mismatch": mismatch.wait(), **{id: fault_result(*f) for id, f in faults.items()}}
    killer.join(200)
    for k, v in out.items(): print(f"{k}: {(v.get('cluster') if isinstance(v, dict) else v).duration_s:.1f} s")
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

def test_partition_named_on_both_sides_within_seconds(runs):
    r = runs["node-partition"]
    d0, d1 = r["diagnosis"], r["node1_diagnosis"]
    assert r["status"] == "hung" and d0 and d0["kind"] == "node-lost" and d0["collective"]["how"] == "silent", r["cluster"].text()
    assert "node 1 (host node1" in d0["headline"] and "train.py:" in d0["headline"], d0["headline"]
    assert d1 and d1["kind"] == "node-lost" and "198.18.0.1" in d1["headline"], d1  # node 1 names the side it lost
    print(f"partition named {r['named_after_s']} s (node 0) and {r['node1_named_after_s']} s (node 1) after the link went down")
    assert r["named_after_s"] <= 10.0 and r["node1_named_after_s"] <= 10.0, r
    assert r["left"] == {}

@pytest.mark.skipif(NO_IPTABLES is not None, reason=NO_IPTABLES or "")
def test_firewall_passing_only_the_rendezvous_port(runs):
    fw = runs["node-firewall"]
    d = fw["diagnosis"]
    assert fw["status"] == "hung" and d and d["kind"] == "never-joined", fw["cluster"].text()
    assert d["collective"]["cause"] == "data-ports-blocked" and "rendezvous" in d["headline"], d["headline"]
    assert fw["node1_diagnosis"]["headline"] == d["headline"] and fw["left"] == {}

def test_loopback_hostname_on_node1_named(runs):
    lo = runs["node-loopback-hostname"]
    d = lo["diagnosis"]
    assert lo["status"] == "hung" and d and d["kind"] == "never-joined", lo["cluster"].text()
    assert d["collective"]["cause"] == "hostname-loopback" and "node 1's hostname node1 resolves to 127.0.1.1" in d["headline"], d["headline"]
    on_node1 = [int(r) for r, s in d["ranks"].items() if s.get("node_host") == "node1"]
    assert d["culprit_ranks"] == on_node1 and "GLOO_SOCKET_IFNAME" in d["fix"], d
    assert lo["left"] == {}

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
