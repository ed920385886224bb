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
    assert got["while_queued"] == [(1, "started")] or got["while_queued"] == [[1, "started"]], got  # queued, not completed
    assert [1, "completed"] in got["after"], got  # completed once the GPU ran it
