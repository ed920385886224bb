"""Shared helpers for distlab's tests: polling with deadlines and looking for a run's processes."""
import time
from distlab.run.reaper import run_processes

def wait_for(pred, timeout_s: float, interval_s: float = 0.05, what: str = "condition"):
    "Poll `pred` until it returns something truthy; fail the test after `timeout_s`."
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        v = pred()
        if v: return v
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")

def survivors(run_id: str) -> list[str]:
    "Command lines of processes of `run_id` still alive."
    out = []
    for p in run_processes(run_id):
        try: out.append(" ".join(p.cmdline()))
        except Exception: pass
    return out

def gone_within(run_id: str, timeout_s: float = 5.0):
    "Assert no process of `run_id` is alive `timeout_s` from now at the latest."
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if not survivors(run_id): return
        time.sleep(0.1)
    raise AssertionError(f"processes of {run_id} still alive after {timeout_s}s: {survivors(run_id)}")
