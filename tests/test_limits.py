"""Real limits (distlab.run.limits: CPU quota, throttled volume, memory limit) leave nothing behind, whatever way their owner ends: released, SIGKILLed (its
reaper removes them), or SIGKILLed with its reaper (the next start sweeps them); a live owner's are never swept."""
import json, os, signal, subprocess, sys, time
import psutil
import pytest
from distlab.run.limits import Limits, apply_limits, attach_pid, leftovers, missing_privileges, memory_dir, sweep_leftovers

BOTH = Limits(cpu_quota=0.3, read_mb_s=4, fill="distlab.run.limits:write_test_files", mem_mib=64)
pytestmark = pytest.mark.skipif(missing_privileges(BOTH) is not None, reason=f"not run: {missing_privileges(BOTH)}")
NOTHING = {"cgroups": [], "mounts": [], "loops": [], "volumes": [], "state": []}
OWNER = ("from distlab.run.limits import *; import sys; a = apply_limits(Limits(cpu_quota=0.3, read_mb_s=4, "
         "fill='distlab.run.limits:write_test_files', mem_mib=64), nproc=2); print(a.token, flush=True); sys.stdin.read()")


def gone_within(token: str, seconds: float = 20.0) -> dict:
    "Poll until nothing of `token` is left (or the deadline); what is left."
    end = time.monotonic() + seconds
    while (left := leftovers(token)) != NOTHING and time.monotonic() < end: time.sleep(0.1)
    return left


def start_owner():
    p = subprocess.Popen([sys.executable, "-c", OWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    token = p.stdout.readline().strip()
    left = leftovers(token)
    assert all(left[k] for k in ("cgroups", "mounts", "loops", "volumes", "state")), left  # all made
    assert len(left["cgroups"]) == 4, left  # cpu (the quota rank, the others), blkio, and rank 1's memory
    return p, token


def test_released_limits_leave_nothing():
    a = apply_limits(BOTH, nproc=2)
    assert leftovers(a.token)["loops"]
    assert a.release() == {}
    assert leftovers(a.token) == NOTHING


def test_a_memory_limit_is_enforced_by_the_oom_killer_and_its_figures_kept():
    "A process that touches 200 MiB in a 64 MiB memory cgroup is SIGKILLed by the kernel; the cgroup's peak, its OOM kill and the kernel's line are kept; nothing is left."
    a = apply_limits(Limits(mem_mib=64, mem_ranks=(0,)), nproc=1)
    try:
        test = memory_dir(a.token, 0)
        assert (test / "memory.limit_in_bytes").read_text().strip() == str(64 << 20)
        if (test / "memory.memsw.limit_in_bytes").exists(): assert (test / "memory.memsw.limit_in_bytes").read_text().strip() == str(64 << 20)
        hog = subprocess.Popen([sys.executable, "-c", "import sys, time; sys.stdin.read(); x = bytearray(200 << 20); time.sleep(5)"], stdin=subprocess.PIPE)
        assert attach_pid(a, 0, hog.pid)
        hog.stdin.close()
        assert hog.wait(30) == -signal.SIGKILL
    finally: left = a.release()
    m = a.memory[0]
    assert left == {} and leftovers(a.token) == NOTHING, (left, leftovers(a.token))
    assert m["oom_kills"] == 1 and 60 <= m["peak_mib"] <= 64, m
    if a_kmsg_readable(): assert any(f"Killed process {hog.pid} (python)" in l for l in m["kernel"]), m["kernel"]


def a_kmsg_readable() -> bool:
    try: os.close(os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)); return True
    except OSError: return False


def test_an_owner_killed_outright_is_cleaned_up_by_its_reaper():
    p, token = start_owner()
    p.send_signal(signal.SIGKILL); p.wait()
    assert gone_within(token) == NOTHING


def test_what_a_killed_owner_and_reaper_left_is_swept_at_the_next_start():
    p, token = start_owner()
    reaper = [q for q in psutil.process_iter(["cmdline"]) if q.info["cmdline"] and q.info["cmdline"][-2:] == ["reap", token]]
    assert len(reaper) == 1, reaper
    reaper[0].kill(); p.send_signal(signal.SIGKILL); p.wait(); reaper[0].wait(5)
    assert leftovers(token) != NOTHING  # nobody removed them
    mine = apply_limits(Limits(cpu_quota=0.5), nproc=2)  # the next start sweeps first
    try:
        assert leftovers(token) == NOTHING
        assert sweep_leftovers(min_age_s=0) == []  # a live owner's limits are not touched
        assert leftovers(mine.token)["cgroups"]
    finally: mine.release()
    assert leftovers(mine.token) == NOTHING


def test_a_launcher_killed_mid_run_leaves_neither_ranks_nor_limits(tmp_path):
    "`distlab run dataloader-bottleneck` SIGKILLed once its ranks read from the throttled volume: the run's reaper ends the ranks, the limits' reaper removes cgroups, mount and loop device."
    from helpers import gone_within as ranks_gone_within
    from pathlib import Path
    cli = Path(sys.executable).parent / "distlab"
    p = subprocess.Popen([str(cli), "run", "dataloader-bottleneck", "--backend", "gloo", "--nproc", "2", "--runs-root", str(tmp_path)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end, placed = time.monotonic() + 120, []
    while time.monotonic() < end and len(placed) < 2:  # both ranks in the volume's blkio cgroup: they are reading through it
        cgs = [c for c in leftovers()["cgroups"] if "/blkio/" in c]
        placed = [pid for c in cgs for pid in (Path(c) / "cgroup.procs").read_text().split()]
        time.sleep(0.1)
    assert len(placed) >= 2 and p.poll() is None, (placed, p.poll())
    token = cgs[0].rsplit("distlab_limits-", 1)[1]
    p.send_signal(signal.SIGKILL); p.wait()
    run_id = next(tmp_path.glob("*-dataloader-bottleneck-broken-*")).name
    ranks_gone_within(run_id, 20)
    assert gone_within(token, 20) == NOTHING
