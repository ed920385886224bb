"""The ledger on NCCL: a collective is `started` (queued on the GPU) until the GPU has run it, not when the host call returns."""
import json, os, socket, subprocess, sys
from pathlib import Path
import pytest
from distlab.contract import make_run_dir

pytestmark = pytest.mark.gpu
SCRIPTS = Path(__file__).parent / "scripts"

def free_port() -> int:
    with socket.socket() as s: s.bind(("127.0.0.1", 0)); return s.getsockname()[1]

def test_nccl_collective_is_not_completed_while_queued_on_the_gpu(tmp_path):
    run_dir = make_run_dir(tmp_path / "run")
    env = {**os.environ, "DISTLAB_RUN_DIR": str(run_dir), "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "DISTLAB_BACKEND": "nccl",
           "PYTHONPATH": str(Path(__file__).parents[1])}
    p = subprocess.run([sys.executable, str(SCRIPTS / "nccl_queued.py")], env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["returned"] == "None"  # a sync call returns what torch's sync call returns
    assert got["returned_s"] < 0.5, got  # the host call only queued it (the communicator was made by a first call)
    assert got["while_queued"] == [[2, "started"]], got  # the second all_reduce: queued, not completed
    assert [2, "completed"] in got["after"], got  # completed once the GPU ran it


def run_script(tmp_path, name: str, **extra_env) -> dict:
    "Run tests/scripts/`name` as rank 0 of an NCCL world of 1 under the ledger; its last stdout line as JSON."
    run_dir = make_run_dir(tmp_path / "run")
    env = {**os.environ, "DISTLAB_RUN_DIR": str(run_dir), "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "DISTLAB_BACKEND": "nccl",
           "PYTHONPATH": str(Path(__file__).parents[1]), **extra_env}
    p = subprocess.run([sys.executable, str(SCRIPTS / name)], env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])

def test_nccl_collective_behind_a_long_kernel_gets_its_gpu_time(tmp_path):
    got = run_script(tmp_path, "nccl_gpu_time.py", DISTLAB_GPU_SPAN_EVERY="2")
    sleep_s = got["sleep_s"]
    for name in ("sync", "async", "ddp_timed"):  # a sync all_reduce, an async one waited on, a DDP backward timed on the GPU
        g = got[name]
        assert g["dur_s"] is not None, got  # completed, with a duration
        # the GPU's time for a 4 MB all_reduce on one rank (or a tiny backward and its bucket), not the ~1 s kernel
        # queued before it, which the host-side poll (the old path) counted
        assert 0 < g["dur_s"] < 0.25 * sleep_s, (name, got)
        # and `completed` only once the GPU got past the kernel (counted from its queueing), however early the host call returned
        assert g["completed_after_s"] >= 0.8 * sleep_s, (name, got)
    # a DDP backward between timed ones (15 of 16 by default) has a bare end event: `completed` still waits for the
    # GPU, and its `dur_s` is the host call's time (the GPU span is not measured for it)
    bare = got["ddp_bare"]
    assert bare["completed_after_s"] >= 0.8 * sleep_s, got
    assert bare["dur_s"] is not None and 0 <= bare["dur_s"] <= bare["returned_s"] + 1e-3, got


def test_cached_current_stream_follows_the_users_stream():
    "The ledger's events go on the stream the collective is queued on: the current one, also inside `torch.cuda.stream(s)`."
    import torch
    from distlab.rank.ledger import _current_stream
    assert _current_stream() == torch.cuda.current_stream()
    assert _current_stream(torch.device("cuda", 0)) == torch.cuda.current_stream(0)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        assert _current_stream() == side and _current_stream(torch.device("cuda")) == side
    assert _current_stream() == torch.cuda.current_stream() != side
