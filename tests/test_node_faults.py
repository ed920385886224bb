"""Faults in the nodes' setup, on 2 emulated nodes (needs root), each broken and fixed on the kernel's own mechanism
(`distlab.scenarios.on_nodes.NODE_FAULTS`): jumbo frames on both nodes with the switch at 1500 (small messages pass,
the first large collective never ends: node 0's watch says `network-stall`), a link that drops packets at random
(iptables `statistic`: slow, uneven all-reduces with no rank late: `slow-network`), a node under a CPU quota (the
straggler named on node 1), and GLOO_SOCKET_IFNAME naming an interface only node 0 has. The six network runs at
once, then the two straggler runs; nothing is left behind."""
import shutil
from pathlib import Path
import pytest
from distlab.scenarios.performance import busy_note
from distlab.config import LaunchConfig
from distlab.run.nodes import leftovers, missing_privileges
from distlab.watch.watcher import STACK_GAP_S
from distlab.scenarios.on_nodes import NODE_FAULTS, start_fault, fault_result, straggler_across

MISSING = missing_privileges(["cpu"])
pytestmark = [pytest.mark.skipif(MISSING is not None, reason=MISSING or ""), pytest.mark.slow]
STALL_S = LaunchConfig().stall_after_s  # the launchers' stall threshold
NO_IPTABLES = None if shutil.which("iptables") else "the lossy link needs iptables in node 1's namespace (apt-get install iptables)"

def _run_all(tmp, runs: list[tuple[str, str]]) -> dict:
    "Start every (id, variant) at once, then wait for each; a failure to start stops the ones already started."
    jobs = {}
    try:
        for id, v in runs: jobs[id, v] = start_fault(id, v, runs_root=tmp, timeout_s=150, join_timeout_s=45)  # a lossy link's lost SYNs wait 1 s, 3 s, ...
        return {k: fault_result(*j) for k, j in jobs.items()}
    finally:
        for job, _ in jobs.values(): job.stop()

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("node_faults")
    net = ["node-mtu", "node-socket-ifname"] + ([] if NO_IPTABLES else ["node-lossy-link"])
    out = _run_all(tmp, [(id, v) for id in net for v in ("broken", "fixed")])
    out |= _run_all(tmp, [("node-straggler", v) for v in ("broken", "fixed")])  # after: its nodes' cgroups weigh 10 processes each, and would starve the others
    for (id, v), r in out.items():
        print(f"{id}/{v}: {r['status']} in {r['cluster'].duration_s:.1f} s; {(r['diagnosis'] or {}).get('kind')}; {r['figures']}")
    return out

def _clean(r: dict):
    assert r["left"] == {}, r["left"]
    assert not any(leftovers(r["cluster"].token).values()), leftovers(r["cluster"].token)

def test_jumbo_frames_through_a_1500_switch_stall_the_first_large_collective(runs):
    b, f = runs["node-mtu", "broken"], runs["node-mtu", "fixed"]
    d = b["watch_diagnosis"]  # node 0's launcher: its live watch across the nodes, nothing read afterwards
    assert b["status"] != "ok" and d and d["kind"] == "network-stall" and b["diagnosis"] == d, b["cluster"].text()
    c = d["collective"]
    print(f"jumbo frames: {d['headline']}\n  node 1 was told: {(b['node1_diagnosis'] or {}).get('headline')}")
    assert c["init_ok"] and {r: n["node"] for r, n in c["nodes"].items()} == {"0": 0, "1": 1}, c  # the process group formed: its small messages passed
    assert c["op"] == "ddp_init" and "train.py:" in c["site"] and 1 in c["waiting"] and c["bytes"] == 74784, c  # DDP's first broadcast (75 KB) never reached rank 1
    assert sorted(c["waiting"] + c["done_by"]) == [0, 1], c  # rank 0, its source, finished it (its bytes left) or waits too
    assert c["waited_s"] >= c["allowed_s"] >= STALL_S, c  # the stall threshold after the last rank arrived, and its 75 KB at 100 Mbit/s
    # named within 1 s of the moment it was one: the allowance passed since the last arrival, and every waiting rank idle for the
    # stall threshold (the hub's CPU readings); when rank 0, on the hub itself, waits too, its two stack dumps STACK_GAP_S apart come first
    idle = c["idle_s"]
    assert set(idle) == {str(r) for r in c["waiting"]} and all(x is not None and x >= STALL_S for x in idle.values()), c
    named_after_s = min(c["waited_s"] - c["allowed_s"], min(idle.values()) - STALL_S)
    print(f"  named {c['waited_s']} s after the last rank entered, {named_after_s:.2f} s after it was a stall; idle {idle}")
    assert named_after_s <= 1.0 + (STACK_GAP_S + 1.0 if 0 in c["waiting"] else 0.0), c
    assert "MTU" in d["headline"] and "rank 1 on node 1" in d["headline"] and "ping -M do -s 8972" in d["fix"], d["headline"]
    assert (b["node1_diagnosis"] or {}).get("kind") == "network-stall", b["node1_diagnosis"]  # the hub's verdict crossed the same path
    assert f["status"] == "ok" and f["diagnosis"] is None, f["cluster"].text()
    _clean(b); _clean(f)

@pytest.mark.skipif(NO_IPTABLES is not None, reason=NO_IPTABLES or "")
def test_lossy_link_slow_uneven_steps_named_the_network(runs):
    b, f = runs["node-lossy-link", "broken"], runs["node-lossy-link", "fixed"]
    assert b["status"] == "ok" and f["status"] == "ok", ((b["diagnosis"] or {}).get("headline"), b["cluster"].text(), f["cluster"].text())
    d = b["watch_diagnosis"]  # node 0's launcher: the advisory rules of its watch on the finished run
    assert d and d["kind"] == "slow-network" and d["advisory"] and "on the network" in d["headline"], (d, b["figures"])
    assert f["diagnosis"] is None, (f["diagnosis"], f["figures"])
    bw, fw = b["figures"]["wire_ms"], f["figures"]["wire_ms"]
    print(f"slow network: {d['headline']}\nall-reduce after the last rank arrived, ms: lossy {bw}, clean {fw}; "
          f"steps: lossy {b['figures']['step_ms']}, clean {f['figures']['step_ms']}")
    assert bw["p90"] >= 3 * fw["p90"] and bw["max"] >= 200, (bw, fw)  # Linux's retransmission timer: 200 ms at least
    _clean(b); _clean(f)

def test_straggler_node_named_on_node1(runs):
    b, f = runs["node-straggler", "broken"], runs["node-straggler", "fixed"]
    assert b["status"] == "ok" and f["status"] == "ok", (b["cluster"].text(), f["cluster"].text())
    d = b["diagnosis"]
    assert d and d["kind"] == "straggler" and d["culprit_ranks"] == [1], (d, b["figures"], busy_note())
    assert "rank 1 on node 1 (host node1)" in d["headline"], d["headline"]
    w = b["watch_diagnosis"]  # node 0's live watch across nodes, not only the records read afterwards
    assert w and w["kind"] == "straggler" and w["culprit_ranks"] == [1] and "rank 1 on node 1 (host node1)" in w["headline"], (w, busy_note())
    assert f["diagnosis"] is None or f["diagnosis"]["kind"] != "straggler", f["diagnosis"]
    assert straggler_across(f["cluster"]) is None, f["figures"]
    print(f"straggler node: {d['headline']}; steps broken {b['figures']['step_ms']} fixed {f['figures']['step_ms']}")
    _clean(b); _clean(f)

def test_socket_ifname_only_node0_has(runs):
    b, f = runs["node-socket-ifname", "broken"], runs["node-socket-ifname", "fixed"]
    d = b["diagnosis"]
    assert b["status"] != "ok" and d and d["kind"] == NODE_FAULTS["node-socket-ifname"].kind, b["cluster"].text()
    assert d["culprit_ranks"] == [1] and "ib0" in d["headline"] and "node 1 (host node1)" in d["headline"], d["headline"]
    assert f["status"] == "ok" and f["diagnosis"] is None, f["cluster"].text()
    _clean(b); _clean(f)

def test_the_command_line_runs_a_fault_and_says_it_ended_as_the_lesson_says(tmp_path):
    "`distlab cluster --fault ID`: the same lesson from a shell; exit 0 when the broken setup gets its diagnosis, nothing left."
    import json, subprocess, sys
    p = subprocess.run([sys.executable, "-m", "distlab.cli", "cluster", "--fault", "node-socket-ifname", "--runs-root", str(tmp_path), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "node-socket-ifname (broken): status" in p.stderr and "as expected" in p.stderr, p.stderr[-2000:]
    r = json.loads(p.stdout)  # stdout is the JSON alone: the ranks' lines and the summary are on stderr
    assert r["diagnosis"]["kind"] == "never-joined" and "node 1" in r["diagnosis"]["headline"], r["diagnosis"]
    assert "GLOO_SOCKET_IFNAME" in p.stderr and r["left"] == {}, r["left"]

def test_the_tour_runs_the_node_faults_broken_and_fixed(tmp_path):
    "`distlab tour` (the README's main job) takes the node faults after the catalogue: each variant's row, its verdict, exit 0."
    import json, subprocess, sys
    p = subprocess.run([sys.executable, "-m", "distlab.cli", "tour", "--only", "node-socket-ifname", "--runs-root", str(tmp_path / "runs"),
                        "--plots", str(tmp_path / "plots"), "--json"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
    assert "node-socket-ifname broken ... ok hung (never-joined, ranks [1])" in p.stderr and "2/2 as expected" in p.stderr, p.stderr[-2000:]
    rows = {r["variant"]: r for r in json.loads(p.stdout)}  # stdout is the JSON alone: progress and table are on stderr
    assert rows["broken"]["matched"] and "rank 1 on node 1 (host node1)" in rows["broken"]["diagnosis"]["headline"], rows["broken"]
    assert rows["fixed"]["matched"] and rows["fixed"]["status"] == "ok" and rows["fixed"]["figures"]["steps"] > 0, rows["fixed"]
    for r in rows.values():  # the cluster's directory is named ...-cluster-TOKEN
        names = sorted(Path(p).name.rsplit("-", 1)[-1] for p in r["plots"])  # both nodes' ranks in one figure each
        assert names == ["progress.png", "timeline.png"] and all(Path(p).read_bytes()[:4] == b"\x89PNG" for p in r["plots"]), r["plots"]
        token = r["run_dir"].rsplit("-", 1)[-1]
        assert not any(leftovers(token).values()), leftovers(token)


def test_the_doctor_finds_the_jumbo_frame_hole_before_the_job():
    "`distlab doctor` on node 1, MASTER_ADDR=node0: the path-mtu check fails where the switch is at 1500 under 9000-byte nodes, passes end to end."
    import subprocess, sys
    from distlab.run.nodes import EmulatedCluster, NodeSpec
    from distlab.scenarios.on_nodes import JUMBO_MTU, fault_setup
    seen = {}
    for variant in ("broken", "fixed"):
        with EmulatedCluster([NodeSpec(mtu=JUMBO_MTU), NodeSpec(mtu=JUMBO_MTU)]) as c:
            for cmd in fault_setup(c, "node-mtu", variant)[0]:
                if not cmd[0].startswith("#"): subprocess.run(cmd, check=True)
            p = c.popen(1, ["env", "MASTER_ADDR=node0", sys.executable, "-m", "distlab.cli", "doctor", "--no-gpu"], stdout=subprocess.PIPE, text=True)
            out = p.communicate(timeout=120)[0]
            seen[variant] = (p.returncode, [l for l in out.splitlines() if l.split()[1:2] == ["path-mtu"]])
            token = c.token
        assert not any(leftovers(token).values()), leftovers(token)
    code, lines = seen["broken"]
    assert code == 1 and lines and lines[0].startswith("FAIL") and f"frames of {JUMBO_MTU} bytes" in lines[0] and "1500-byte ones do" in lines[0], seen
    code, lines = seen["fixed"]
    assert lines and lines[0].startswith("OK") and "reach 198.18.0.1 whole" in lines[0], seen
