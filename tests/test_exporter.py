"""The exporter end to end: a real Prometheus server scrapes `distlab launch --export` during a real 2-rank run,
then `distlab export` of the finished run, and its query API returns the run's own figures."""
import json, os, shutil, signal, socket, statistics, subprocess, sys, time, urllib.parse, urllib.request
from pathlib import Path
import pytest
from helpers import wait_for
from distlab.rank.events import read_events

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "scripts" / "profiled_train.py"
STEPS, SLOW_RANK = 24, 1

def free_port() -> int:
    with socket.socket() as s: s.bind(("127.0.0.1", 0)); return s.getsockname()[1]

def prometheus_binary() -> str:
    exe = shutil.which("prometheus") or ("/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None)
    if exe is None:
        pytest.fail("the Prometheus server is missing: install Debian's package (`apt-get install -y prometheus`; "
                    "scripts/test.sh does it when run as root). This test needs a real server, it is never skipped")
    return exe

@pytest.fixture
def prometheus(tmp_path):
    "A Prometheus server of its own (temp config and storage, a free port) scraping one target every 0.5 s; stopped after."
    target, port = free_port(), free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(f"global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\nscrape_configs:\n  - job_name: distlab\n"
                   f"    static_configs:\n      - targets: ['127.0.0.1:{target}']\n")
    log = open(tmp_path / "prometheus.log", "w")
    proc = subprocess.Popen([prometheus_binary(), f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    api = f"http://127.0.0.1:{port}"
    def ready():
        assert proc.poll() is None, f"prometheus exited {proc.returncode}: {(tmp_path / 'prometheus.log').read_text()[-2000:]}"
        try: return urllib.request.urlopen(f"{api}/-/ready", timeout=2).status == 200
        except OSError: return False
    try:
        wait_for(ready, 60, 0.2, "prometheus to be ready")
        yield {"api": api, "target_port": target, "log": tmp_path / "prometheus.log"}
    finally:
        proc.terminate()
        try: proc.wait(10)
        except subprocess.TimeoutExpired: os.killpg(proc.pid, signal.SIGKILL); proc.wait(10)
        log.close()

def query(api: str, promql: str) -> dict[str, float]:
    "rank -> value of an instant query (one series per rank)."
    url = f"{api}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    data = json.loads(urllib.request.urlopen(url, timeout=5).read())
    assert data["status"] == "success", data
    return {r["metric"].get("rank"): float(r["value"][1]) for r in data["data"]["result"]}

def test_prometheus_scrapes_a_live_run_and_a_finished_one(prometheus, tmp_path):
    api, port, runs = prometheus["api"], prometheus["target_port"], tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    launch = subprocess.Popen([sys.executable, "-m", "distlab.cli", "launch", "--nproc-per-node", "2", "--backend", "gloo",
                               "--runs-root", str(runs), "--export", str(port), str(SCRIPT), str(STEPS), "0.05", str(SLOW_RANK)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        # while the ranks train, Prometheus already has their steps from the launcher's exporter
        live = wait_for(lambda: (v := query(api, "distlab_rank_steps_total")) and len(v) == 2 and 0 < min(v.values()) < STEPS and v,
                        120, 0.2, "Prometheus to scrape steps of both ranks while they train")
        out, _ = launch.communicate(timeout=180)
    finally:
        if launch.poll() is None: os.killpg(launch.pid, signal.SIGKILL); launch.wait()
    assert launch.returncode == 0, out
    assert f"127.0.0.1:{port}/metrics" in out, out
    run_dir = next(runs.iterdir())
    events = {r: read_events(run_dir, r) for r in (0, 1)}
    steps = {r: [e for e in evs if e["ev"] == "step"] for r, evs in events.items()}
    assert all(len(s) == STEPS for s in steps.values()), {r: len(s) for r, s in steps.items()}

    # the finished run, served by `distlab export`: Prometheus ends with the run's own figures
    export = subprocess.Popen([sys.executable, "-m", "distlab.cli", "export", str(run_dir), "--port", str(port), "--for", "60"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        done = wait_for(lambda: (v := query(api, 'distlab_rank_state{state="finished"}')) and v == {"0": 1.0, "1": 1.0} and v,
                        60, 0.2, "Prometheus to scrape the finished run")
        got_steps = query(api, "distlab_rank_steps_total")
        got_step_s = query(api, "distlab_rank_step_seconds")
        got_slow = query(api, "distlab_rank_straggler")
        got_rss = query(api, "distlab_rank_resident_memory_bytes")
        got_lost = query(api, "distlab_run_straggler_lost_seconds")
    finally:
        export.send_signal(signal.SIGTERM)  # what kill/systemd send; SIGINT is ignored in a shell's background job (CI's)
        try: export.wait(15)
        except subprocess.TimeoutExpired: os.killpg(export.pid, signal.SIGKILL); export.wait()
    assert export.returncode == 0, export.stdout.read()
    assert live and done
    assert got_steps == {"0": STEPS, "1": STEPS}, got_steps
    for r in (0, 1):  # the median step time over the steps past the warm-up, exactly as the events say
        expect = statistics.median(e["step_s"] for e in steps[r] if e["step"] >= 2)
        assert got_step_s[str(r)] == pytest.approx(expect, rel=1e-6), (r, got_step_s, expect)
    assert got_slow == {"0": 0.0, "1": 1.0}, got_slow  # rank 1 sleeps 3x as long per step: the others wait for it
    assert got_step_s["1"] >= 0.15 and got_lost[None] > 0.05, (got_step_s, got_lost)
    health = {r: [e for e in evs if e["ev"] == "health"][-1] for r, evs in events.items()}
    assert {r: got_rss[str(r)] for r in (0, 1)} == {r: float(h["rss_bytes"]) for r, h in health.items()}
    assert all(v > 50 * 2**20 for v in got_rss.values()), got_rss  # a torch process: tens of MB at least
