"""Emulated nodes (network namespaces joined by a bridge, tc, cgroups; needs root): a two-node job of an unmodified
script with one command, `distlab cluster --bench` reading a kernel-shaped link, and nothing left behind (namespaces,
links, hosts files, cgroups, processes) after each exit path: the end, stop, timeout, Ctrl-C, the launcher SIGKILLed,
and the sweep at the next start when its reaper died too."""
import json, os, re, shutil, signal, subprocess, sys, time
from pathlib import Path
import psutil
import pytest
from helpers import wait_for
from distlab.run.nodes import EmulatedCluster, leftovers, missing_privileges, sweep_leftovers
from distlab.run.node_jobs import launch_nodes

MISSING = missing_privileges(["cpu"])
needs_root = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
SCRIPTS = Path(__file__).parent / "scripts"
DISTLAB = [sys.executable, "-m", "distlab.cli"]

def left(token: str) -> dict:
    return {k: v for k, v in leftovers(token).items() if v}

def nothing_left(token: str, timeout_s: float = 15):
    "Assert that cluster `token` has no namespace, link, hosts file, cgroup, process or state file left within `timeout_s`."
    wait_for(lambda: not left(token), timeout_s, interval_s=0.2, what=f"cluster {token} removed; still there: {left(token)}")

def _as_a_foreground_job():
    # A shell without job control starts its background jobs with SIGINT ignored, and Python keeps an inherited SIG_IGN
    # (so Ctrl-C at a terminal spares `distlab cluster ... &`). CI runs this suite as such a job: without this line the
    # Ctrl-C below reached a launcher that ignores it, and the test waited out its 60 s.
    signal.signal(signal.SIGINT, signal.SIG_DFL)

def cli(args: list[str], out: Path, err: Path) -> subprocess.Popen:
    "`distlab ARGS` in a session of its own, as a terminal's foreground job (Ctrl-C at its default), its output in files."
    return subprocess.Popen(DISTLAB + args, stdout=open(out, "w"), stderr=open(err, "w"), start_new_session=True,
                            preexec_fn=_as_a_foreground_job)

def agent_logs(root: Path) -> str:
    "Every node agent's log under `root`, for a failure's message."
    return "\n".join(f"--- {p}:\n{p.read_text(errors='replace')[-1500:]}" for p in sorted(root.glob("*cluster-*/node*/agent.log")))

def token_of(err: Path) -> str | None:
    m = re.search(r"distlab cluster ([0-9a-f]{6}):", err.read_text() if err.exists() else "")
    return m and m[1]

@needs_root
@pytest.mark.slow
def test_unmodified_ddp_script_on_two_nodes_with_one_command(tmp_path):
    p = subprocess.run(DISTLAB + ["cluster", "--nnodes", "2", "--nproc-per-node", "2", "--node-link-mbit", "1000", "--node-cpu-quota",
                                  "1.5", "--runs-root", str(tmp_path), "--json", str(SCRIPTS / "user_ddp_train.py"), "4"],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout)  # stdout is the JSON alone: the ranks' lines are on stderr
    assert res["status"] == "ok" and res["left"] == {}, res
    done = {}  # global rank -> the node whose launcher ran it
    for line in p.stderr.splitlines():
        if m := re.fullmatch(r"\[(node\d) rank(\d)\] done (\d) .*", line): done[int(m[3])] = m[1]
    assert sorted(done) == [0, 1, 2, 3], p.stderr[-3000:]
    assert {frozenset(r for r, n in done.items() if n == h) for h in ("node0", "node1")} == {frozenset({0, 1}), frozenset({2, 3})}, done
    hosts = {json.loads(l)["host"] for n in res["nodes"] for f in Path(n["run_dir"], "events").glob("rank*.jsonl")
             for l in f.read_text().splitlines()[:1]}  # each rank's hello names the host it ran on
    assert hosts == {"node0", "node1"}, hosts
    nothing_left(res["token"], 1)

@needs_root
@pytest.mark.slow
def test_bench_across_nodes_reads_the_shaped_link(tmp_path):
    rate_mbit = 200
    p = subprocess.run(DISTLAB + ["cluster", "--bench", "--node-link-mbit", str(rate_mbit), "-b", "8M", "-e", "8M", "-n", "3", "-w", "1",
                                  "--runs-root", str(tmp_path), "--json"], capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout)  # stdout is the JSON alone: the table is on stderr
    row = res["rows"][0]
    link_gbps = rate_mbit / 8 / 1000  # GB/s; for 2 ranks, all_reduce's busbw = algbw = the one link's rate
    assert row["wrong"] == 0 and 0.9 <= row["busbw_gbps"] / link_gbps <= 1.02, (row["busbw_gbps"], link_gbps)
    nothing_left(res["run_dir"].rsplit("-", 1)[1], 1)  # the cluster's directory ends with its token

@needs_root
@pytest.mark.slow
def test_stop_and_timeout_leave_nothing(tmp_path):
    ready = []
    job = launch_nodes(SCRIPTS / "sleepy_ranks.py", [600], nnodes=2, nproc=1, watch=False, runs_root=tmp_path,
                       on_line=lambda node, rank, stream, line: ready.append(node) if "ready" in line else None)
    wait_for(lambda: len(ready) == 2, 120, interval_s=0.2, what="a rank ready on each node")
    assert left(job.cluster.token)["processes"]  # torchrun, the ranks and their DataLoader workers, in the nodes
    res = job.stop()
    assert res.status == "stopped" and res.left == {}, res.text()
    nothing_left(res.token, 1)
    # timeout: ended while the nodes are still starting (agents importing, torchrun half up)
    job = launch_nodes(SCRIPTS / "sleepy_ranks.py", [600], nnodes=2, nproc=1, watch=False, runs_root=tmp_path)
    res = job.wait(timeout_s=4)
    assert res.status == "timeout" and res.left == {}, res.text()
    nothing_left(res.token, 1)

@needs_root
@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "sigkill"])
def test_launcher_interrupted_or_killed_leaves_nothing(tmp_path, how):
    out, err = tmp_path / "out", tmp_path / "err"
    p = cli(["cluster", "--nnodes", "2", "--no-watch", "--runs-root", str(tmp_path), str(SCRIPTS / "sleepy_ranks.py"), "600"], out, err)
    try:
        wait_for(lambda: out.read_text().count("ready") == 2, 120, interval_s=0.2, what=f"a rank ready on each node ({err})")
        token = token_of(err)
        assert token and left(token)["processes"] and left(token)["namespaces"], err.read_text()
        if how == "ctrl-c":
            os.killpg(p.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
            try: code = p.wait(60)
            except subprocess.TimeoutExpired: code = "still running 60 s after Ctrl-C"
            assert code == 130, f"{code}\n{err.read_text()[-3000:]}\n{agent_logs(tmp_path)}"
            nothing_left(token, 1)
        else:
            p.kill()  # SIGKILL: no handler runs; the cluster's reaper sees its pipe close
            p.wait(10)
            nothing_left(token, 15)
    finally:
        if p.poll() is None: p.kill(); p.wait()

@needs_root
def test_next_start_sweeps_what_a_killed_launcher_and_reaper_left():
    code = ("import sys; from distlab.run.nodes import EmulatedCluster\n"
            "c = EmulatedCluster(2, cpu_quota=0.5).create(); print(c.token, c._reaper.pid, flush=True); sys.stdin.read()")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    token, reaper = p.stdout.readline().split()
    os.kill(int(reaper), signal.SIGKILL); p.kill(); p.wait()  # both gone: nobody tears the cluster down
    assert {"namespaces", "hosts", "cgroups", "state"} <= set(left(token)), left(token)
    assert token in sweep_leftovers()
    assert left(token) == {}

@needs_root
def test_sweep_spares_a_live_cluster():
    with EmulatedCluster(1) as c:
        assert c.token not in sweep_leftovers() and left(c.token)["namespaces"]
    assert left(c.token) == {}

def test_without_root_one_line_says_what_is_missing(tmp_path):
    if MISSING is not None:  # this machine itself lacks them: the line says so
        assert "run it as root" in MISSING, MISSING
        return
    if shutil.which("setpriv") is None: pytest.skip("setpriv (util-linux) is needed to drop this process's capabilities")
    p = subprocess.run(["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--", *DISTLAB, "cluster", "--runs-root",
                        str(tmp_path), str(SCRIPTS / "user_ddp_train.py")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p
    assert p.stderr.strip().splitlines() == [f"distlab: error: emulated nodes need root with CAP_NET_ADMIN and CAP_SYS_ADMIN "
                                             f"(network namespaces, links, cgroups); this process (uid {os.getuid()}) lacks "
                                             "CAP_NET_ADMIN and CAP_SYS_ADMIN: run it as root (sudo), or give its container "
                                             "those capabilities"], p.stderr
    assert not list(tmp_path.iterdir())  # nothing started, nothing written

@needs_root
@pytest.mark.slow
def test_jupyter_kernel_interrupt_leaves_nothing(tmp_path):
    "A kernel killed outright is the SIGKILL case above: the reaper's pipe closes the same way."
    from kernel_harness import Kernel
    k = Kernel(tmp_path)
    try:
        token = k.run(f"from distlab.run.node_jobs import launch_nodes\nready = []\n"
                      f"job = launch_nodes({str(SCRIPTS / 'sleepy_ranks.py')!r}, [600], nnodes=2, watch=False, runs_root={str(tmp_path)!r}, "
                      f"on_line=lambda node, rank, stream, line: ready.append(node) if 'ready' in line else None)\n"
                      f"print(job.cluster.token)").strip()
        wait_for(lambda: k.run("print(len(ready))").strip() == "2", 120, interval_s=0.5, what="a rank ready on each node")
        assert left(token)["processes"]
        k.interrupt()  # the kernel is idle: distlab's hook stops the job, as it stops a Run
        nothing_left(token, 40)
        assert "stopped" in k.run("print(job.wait(30).status)")
    finally:
        k.shutdown()

def test_elastic_job_lets_torchrun_restart_when_another_node_is_lost():
    "Without root: the launcher's rule. An elastic job (nnodes 1:2, restarts left) told that another node is lost goes on; a node that lost the rendezvous node, a job that is not elastic, or one without restarts stops as before."
    from distlab.config import LaunchConfig
    from distlab.run.launch import Run
    from distlab.watch.diagnosis import Diagnosis
    def goes_on(how: str, **cfg) -> bool:
        run = Run.__new__(Run)  # the rule reads the run's config alone: no torchrun is started
        run.cfg = LaunchConfig(nproc=1, **{"nnodes": 2, "rdzv_backend": "c10d", "rdzv_endpoint": "198.18.0.1:29400", **cfg})
        return run._elastic_goes_on(Diagnosis("node-lost", [1], "node 1 lost", "", "", collective={"how": how}))
    elastic = {"min_nnodes": 1, "max_restarts": 3}
    assert goes_on("silent", **elastic) and goes_on("closed", **elastic)  # node 0 lost node 1: torchrun re-forms the group
    assert not goes_on("hub-silent", **elastic)  # node 1 lost node 0, where the rendezvous is: it cannot rejoin
    assert not goes_on("silent", max_restarts=3) and not goes_on("silent", min_nnodes=1)  # not elastic / no restarts
