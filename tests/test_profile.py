"""StepProfiler's two modes read the same job alike at world 2 (the walkthrough runs the light mode through the
performance scenarios and the buckets mode through the communication ones, never both on one job)."""
import json, os, statistics, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
DELAY_S = 0.04  # the last rank's extra compute per step: what every other rank waits for

def run_modes(tmp_path, nproc: int) -> list[dict]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
           str(ROOT / "tests/scripts/profile_modes.py"), str(tmp_path), str(DELAY_S)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=170, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-3000:]
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(nproc)]

def medians(steps: list[dict], key: str) -> float:
    return statistics.median(s[key] for s in steps[2:])  # past DDP's bucket rebuild

def check_bytes(r: dict):
    for mode in ("light", "buckets"):
        assert {s["comm_bytes"] for s in r[mode]} == {r["grad_bytes"]}, (mode, [s["comm_bytes"] for s in r[mode]])
        assert r["double_step_bytes"][mode] == 2 * r["grad_bytes"], (mode, r["double_step_bytes"])
        assert all(s["profile"] == mode for s in r[mode]) and all(0 <= s["comm_s"] <= s["comm_busy_s"] + 1e-6 for s in r[mode]), r[mode]
    assert all(s["buckets"] == [] for s in r["light"]) and min(s["n_buckets"] for s in r["buckets"][1:]) >= 2

@pytest.mark.timeout(180)
def test_both_modes_see_the_wait_for_a_slow_rank_and_the_same_bytes(tmp_path):
    waiting, slow = run_modes(tmp_path, 2)
    for r in (waiting, slow): check_bytes(r)
    for mode in ("light", "buckets"):
        wait_s, slow_wait_s = medians(waiting[mode], "comm_s"), medians(slow[mode], "comm_s")
        assert wait_s >= 0.5 * DELAY_S, f"{mode}: rank 0 waited {wait_s * 1e3:.1f} ms per step for a rank {DELAY_S * 1e3:.0f} ms slower"
        assert slow_wait_s <= 0.5 * wait_s, f"{mode}: the slow rank waited {slow_wait_s * 1e3:.1f} ms, rank 0 {wait_s * 1e3:.1f} ms"
    light, buckets = medians(waiting["light"], "comm_s"), medians(waiting["buckets"], "comm_s")
    assert 0.5 <= light / buckets <= 2, f"light mode's wait {light * 1e3:.1f} ms against buckets mode's {buckets * 1e3:.1f} ms"

@pytest.mark.gpu
@pytest.mark.timeout(180)
def test_both_modes_take_gpu_times_on_nccl(tmp_path):
    "World 1 on one GPU, slowed on the GPU before each backward: both modes time communication from CUDA events and count the same bytes."
    import torch
    if not torch.cuda.is_available(): pytest.skip("needs a CUDA GPU (NCCL)")
    (r,) = run_modes(tmp_path, 1)
    assert r["backend"] == "nccl"
    check_bytes(r)
    for mode in ("light", "buckets"):
        assert medians(r[mode], "comm_busy_s") > 0, (mode, r[mode])
