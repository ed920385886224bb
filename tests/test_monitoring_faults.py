"""The monitoring faults (distlab.health.monitoring_faults) on Debian's real `prometheus` and `prometheus-pushgateway`
around a real 2-rank job, read from walkthrough 06's run (its section 5 runs them once): a scrape config naming the
wrong port leaves the target down with the connection error and no step-time series, the exporter's port brings both;
a rank SIGKILLed while it pushes stays in the Pushgateway with its last step, served as current, while its series from
the exporter end. And the servers leave nothing behind on any way out, a SIGKILLed starter included. Skipped, with
the reason, where the servers are not installed."""
import contextlib, json, os, re, signal, subprocess, sys, time, urllib.request
from pathlib import Path
import psutil
import pytest
from helpers import gone_within, wait_for
from distlab.health.exporter import Exporter
from distlab.health.monitoring_faults import OWNER, STALE_AFTER_S, Prometheus, Pushgateway, ScrapeJob, free_port, missing_servers, query

STEM = "06_doctor_and_monitoring"
NPROC, STEP_S = 2, 0.05  # the walkthrough's job: 2 ranks, 0.05 s slept per step
pytestmark = pytest.mark.timeout(900)  # the first test here may be the one that runs the walkthrough


def our_servers() -> list[str]:
    "Command lines of live server processes started by distlab (their config or storage lies in a distlab-* temp dir)."
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "/distlab-prometheus-" in cmd or "/distlab-pushgateway-" in cmd: out.append(f"{p.pid}: {cmd}")
    return out


def alive(pid: int) -> bool:
    "True while `pid` runs (a zombie nobody reaped has ended)."
    try: return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess: return False


@pytest.fixture(scope="module")
def monitoring(walkthroughs):
    "What walkthrough 06's section 5 measured (its JSON, written beside the walkthrough's outcomes)."
    if (why := missing_servers()) is not None: pytest.skip(why)
    walkthroughs.outcomes(STEM)  # the one papermill run of the walkthrough this session
    got = json.loads((walkthroughs.root / STEM / "monitoring_faults.json").read_text())
    if "skipped" in got: pytest.skip(got["skipped"])
    gone_within(Path(got["run_dir"]).name)  # no rank, torchrun or worker of the job is left
    assert not our_servers(), our_servers()
    return got


@pytest.mark.slow
@pytest.mark.papermill
def test_prometheus_on_the_wrong_port_then_the_exporters(monitoring):
    broken, fixed = monitoring["scrape-wrong-port"]["broken"], monitoring["scrape-wrong-port"]["fixed"]
    # broken: the real server's targets page says down, with the kernel's refusal; no step-time series at all
    assert broken["scrape_port"] != broken["exporter_port"], broken
    assert broken["health"] == "down" and "connection refused" in broken["last_error"], broken
    assert broken["up"] == 0.0 and broken["step_seconds"] == {}, broken
    assert [c["status"] for c in broken["checks"]] == ["fail"] and str(broken["exporter_port"]) in broken["checks"][0]["fix"], broken["checks"]
    # fixed: the exporter's port; up, and a step time per rank no shorter than the sleep in each step
    assert fixed["scrape_port"] == fixed["exporter_port"] and fixed["health"] == "up" and fixed["last_error"] == "", fixed
    assert fixed["up"] == 1.0 and sorted(fixed["step_seconds"]) == [str(r) for r in range(NPROC)], fixed
    assert all(STEP_S <= v < 20 * STEP_S for v in fixed["step_seconds"].values()), fixed["step_seconds"]
    assert [c["status"] for c in fixed["checks"]] == ["ok"], fixed["checks"]


@pytest.mark.slow
@pytest.mark.papermill
def test_a_sigkilled_rank_stays_in_the_pushgateway_and_leaves_the_exporter(monitoring):
    s = monitoring["pushgateway-stale"]
    # before the kill: both views had every rank, and no push was old
    assert sorted(s["before"]["pushed"]) == sorted(s["before"]["pulled"]) == [str(r) for r in range(NPROC)], s["before"]
    assert s["before"]["alert"] == {}, s["before"]
    # the run ended by the kill: the launch's diagnosis names rank 1 and SIGKILL
    assert s["run_status"] == "failed" and s["exit_codes"]["1"] == -9, (s["run_status"], s["exit_codes"])
    assert s["diagnosis"] == "rank-died" and s["culprit_ranks"] == [1] and "SIGKILL" in s["headline"], s["headline"]
    # pull: rank 1's exporter series ended and the target went down, while the Pushgateway still had rank 1's last step
    assert s["up_distlab_after"] == 0.0 and s["pushed_when_pull_gone"]["1"] == s["pushed_step"], s
    # push: later still, Prometheus shows that step from a fresh scrape of the Pushgateway; only the push time is old
    assert s["up_pushgateway"] == 1.0 and s["shown_step"] == s["pushed_step"] and s["pushed_step"] >= 1, s
    assert s["push_age_s"] >= STALE_AFTER_S and s["shown_sample_age_s"] < s["push_age_s"], s
    stale = [c for c in s["checks"] if c["name"].startswith("push:")]
    assert {c["name"]: c["status"] for c in stale} == {f"push:job=train,rank={r}": "fail" for r in range(NPROC)}, stale


@pytest.mark.slow
@pytest.mark.skipif(missing_servers() is not None, reason=str(missing_servers()))
def test_the_tour_runs_both_monitoring_faults_on_one_job(tmp_path):
    "`distlab tour` (the README's main job) takes the monitoring faults: one job, each variant's row and its verdict, exit 0, nothing left."
    p = subprocess.run([sys.executable, "-m", "distlab.cli", "tour", "--only", "scrape-wrong-port", "pushgateway-stale", "--json",
                        "--runs-root", str(tmp_path / "runs"), "--plots", str(tmp_path / "plots")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
    rows = {(r["scenario"], r["variant"]): r for r in json.loads(p.stdout)}  # stdout is the JSON alone: progress and table are on stderr
    assert sorted(rows) == [(f, v) for f in ("pushgateway-stale", "scrape-wrong-port") for v in ("broken", "fixed")], sorted(rows)
    assert all(r["matched"] and r["problems"] == [] for r in rows.values()), rows
    (run_dir,) = {r["run_dir"] for r in rows.values()}  # both faults from the one job
    wrong, right = rows["scrape-wrong-port", "broken"], rows["scrape-wrong-port", "fixed"]
    assert wrong["status"] == "down" and "connection refused" in wrong["figures"]["last_error"] and wrong["figures"]["step_seconds"] == {}, wrong
    assert right["status"] == "up" and sorted(right["figures"]["step_seconds"]) == [str(r) for r in range(NPROC)], right
    pushed, pulled = rows["pushgateway-stale", "broken"], rows["pushgateway-stale", "fixed"]
    f = pushed["figures"]  # the SIGKILLed rank's last push is still shown, from a fresh sample, after the staleness limit
    assert f["shown_step"] == f["pushed_step"] >= 1 and f["push_age_s"] >= STALE_AFTER_S > f["shown_sample_age_s"], f
    assert pulled["figures"]["up_distlab_after"] == 0.0 and pulled["diagnosis_kind"] == "rank-died" and pulled["culprits"] == [1], pulled
    assert "[ 1/4] scrape-wrong-port broken ... ok target down" in p.stderr and "4/4 as expected" in p.stderr, p.stderr[-2000:]
    gone_within(Path(run_dir).name)  # no rank, torchrun or exporter of the job is left
    assert not our_servers(), our_servers()


@pytest.mark.skipif(missing_servers() is not None, reason=str(missing_servers()))
def test_the_servers_leave_nothing_on_any_exit_path():
    # an exception inside the `with`: stopped, dir removed
    dirs = []
    with pytest.raises(KeyError):
        with Prometheus() as p, Pushgateway() as gw:
            dirs, procs = [p.dir, gw.dir], [p.proc, gw.proc]
            raise KeyError("a cell failing half-way")
    assert all(pr.poll() is not None for pr in procs) and not any(d.exists() for d in dirs), (procs, dirs)
    # the starter SIGKILLed (a kernel killed): the servers get SIGTERM from the kernel; the next start removes their dirs
    code = ("from distlab.health.monitoring_faults import Prometheus, Pushgateway\n"
            "p, g = Prometheus().start(), Pushgateway().start()\n"
            "print(p.dir, g.dir, p.proc.pid, g.proc.pid, flush=True)\n"
            "import time; time.sleep(600)\n")
    starter = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        pdir, gdir, ppid, gpid = starter.stdout.readline().split()
        starter.send_signal(signal.SIGKILL); starter.wait(10)
        wait_for(lambda: not alive(int(ppid)) and not alive(int(gpid)), 30, 0.1, "the servers to exit")
        assert Path(pdir, OWNER).read_text() == str(starter.pid)  # left behind, with its starter's pid...
        with Prometheus(): assert not Path(pdir).exists()  # ...and removed by the next start of its kind
        with Pushgateway(): assert not Path(gdir).exists()
    finally:
        if starter.poll() is None: os.killpg(starter.pid, signal.SIGKILL); starter.wait()
    assert not our_servers(), our_servers()


def not_ok(report: dict) -> dict:
    "name -> status of a doctor report's checks that are not ok."
    return {c["name"]: c["status"] for c in report["checks"] if c["status"] != "ok"}


@pytest.mark.slow
@pytest.mark.papermill
def test_the_doctor_reads_both_faults_off_the_walkthroughs_prometheus(monitoring):
    # `distlab doctor --prometheus`'s checks, asked of the walkthrough's own servers while each fault was live
    broken, fixed = monitoring["scrape-wrong-port"]["broken"], monitoring["scrape-wrong-port"]["fixed"]
    down = f"target:distlab/127.0.0.1:{broken['scrape_port']}"
    assert not_ok(broken["doctor"]) == {down: "fail", "exporter": "warn"}, broken["doctor"]
    (c,) = [c for c in broken["doctor"]["checks"] if c["name"] == down]
    assert "connection refused" in c["evidence"] and f"--export PORT` listens on ({broken['exporter_port']}" in c["fix"], c
    assert fixed["doctor"]["exit_code"] == 0 and not_ok(fixed["doctor"]) == {}, fixed["doctor"]
    assert {c["name"] for c in fixed["doctor"]["checks"]} >= {"exporter", *(f"push:job=train,rank={r}" for r in range(NPROC))}, fixed["doctor"]
    # after the SIGKILL: the exporter's target is down and both ranks' groups are stale, each with the command that clears it
    after = monitoring["pushgateway-stale"]["doctor"]
    bad = not_ok(after)
    assert {k: v for k, v in bad.items() if k.startswith("push:")} == {f"push:job=train,rank={r}": "fail" for r in range(NPROC)}, bad
    assert bad.get(f"target:distlab/127.0.0.1:{fixed['exporter_port']}") == "fail" and after["exit_code"] == 1, bad
    assert all("curl -X DELETE http://" in c["fix"] for c in after["checks"] if c["name"].startswith("push:")), after


def doctor_cli(url: str, *args) -> subprocess.CompletedProcess:
    "`distlab doctor --prometheus URL ARGS` as a user runs it."
    return subprocess.run([sys.executable, "-m", "distlab.cli", "doctor", "--prometheus", url, *args],
                          capture_output=True, text=True, timeout=60)


def lines_of(out: str) -> dict:
    "name -> (status, the rest of the line) of the doctor's printed checks."
    got = {}
    for line in out.splitlines():
        if m := re.match(r"(OK|WARN|FAIL)\s+(\S+)\s+(.*)", line): got[m[2]] = (m[1], m[3])
    return got


PUSHER = """import sys, time, urllib.request
for step in range(10**6):  # a rank pushing its step to the Pushgateway, as push_to_gateway does
    urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=f"train_step {step}\\n".encode(), method="PUT"), timeout=5)
    print(step, flush=True); time.sleep(0.1)
"""


@pytest.mark.slow
@pytest.mark.papermill
def test_distlab_doctor_prometheus_names_the_down_target_and_the_stale_group_then_is_clean(monitoring):
    # the two faults again on real servers, without a new job: the exporter serves the walkthrough's finished run, and
    # the pushing rank is a process that pushes its step every 0.1 s until it is SIGKILLed
    with contextlib.ExitStack() as stack:
        gw, ex = stack.enter_context(Pushgateway()), stack.enter_context(Exporter(monitoring["run_dir"], port=0))
        wrong = free_port()
        push = ScrapeJob("pushgateway", [gw.address], honor_labels=True)
        broken = stack.enter_context(Prometheus([ScrapeJob("distlab", [f"127.0.0.1:{wrong}"]), push]))
        fixed = stack.enter_context(Prometheus([ScrapeJob("distlab", [f"127.0.0.1:{ex.port}"]), push]))
        pusher = subprocess.Popen([sys.executable, "-c", PUSHER, f"{gw.url}/metrics/job/train/rank/1"], stdout=subprocess.PIPE, text=True)
        stack.callback(lambda: (pusher.kill(), pusher.wait()))
        for _ in range(3): assert pusher.stdout.readline(), "the pusher died before pushing 3 steps"
        pusher.send_signal(signal.SIGKILL); pusher.wait(10); killed_t = time.time()
        for p in (broken, fixed):
            for j in p.jobs: p.wait_scraped(j.name, j.targets[0])
        wait_for(lambda: query(broken.url, 'train_step{job="train"}') and time.time() - killed_t > STALE_AFTER_S + 0.5, 30, 0.1,
                 "the dead rank's last step in Prometheus, older than the staleness limit")

        # broken: the target on the wrong port, no distlab series, the dead rank's group: exit 1, each with its fix
        t0 = time.monotonic(); b = doctor_cli(broken.url, "--export-port", str(ex.port)); took = time.monotonic() - t0
        assert b.returncode == 1 and b.stderr == "", (b.returncode, b.stdout, b.stderr)
        got = lines_of(b.stdout)
        status, text = got[f"target:distlab/127.0.0.1:{wrong}"]
        assert status == "FAIL" and "connection refused" in text and f"({ex.port} unless told" in text.split("->")[1], text
        assert got["exporter"][0] == "WARN" and "--export" in got["exporter"][1], got["exporter"]
        status, text = got["push:job=train,rank=1"]
        fix = f"curl -X DELETE http://{gw.address}/metrics/job/train/rank/1"
        assert status == "FAIL" and "last push" in text and fix in text.split("->")[1], text
        assert took < 10, took

        # fixed: Prometheus scrapes the exporter's port, and the group is deleted with the doctor's own command: exit 0
        urllib.request.urlopen(urllib.request.Request(fix.split()[-1], method="DELETE"), timeout=5)
        wait_for(lambda: not query(fixed.url, "push_time_seconds"), 30, 0.1, "the deleted group to leave Prometheus")
        f = doctor_cli(fixed.url, "--export-port", str(ex.port))
        assert f.returncode == 0 and f.stderr == "", (f.returncode, f.stdout, f.stderr)
        got = lines_of(f.stdout)
        assert {n for n, (st, _) in got.items() if st != "OK"} == set(), f.stdout
        assert f"distlab/127.0.0.1:{ex.port}" in got["exporter"][1], got["exporter"]
        servers = [(s.proc, s.dir) for s in (gw, broken, fixed)]
    assert all(proc.poll() is not None and not d.exists() for proc, d in servers), servers  # nothing of the servers is left
