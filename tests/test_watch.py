"""The live collective watch, end to end: real torchrun ranks run unmodified scripts under the shim, a Watcher
in this process names the rank, the collective and the line."""
import os, socket, subprocess, sys, time, uuid
from pathlib import Path
import pytest
from distlab.run.reaper import kill_run
from distlab.watch.watcher import Watcher
from helpers import gone_within

SCRIPTS = Path(__file__).parent / "scripts"
REPO = Path(__file__).parent.parent


def line_of(script: str, mark: str) -> int:
    "The line number of `# MARK:<mark>` in a test script."
    for i, line in enumerate((SCRIPTS / script).read_text().splitlines(), 1):
        if f"# MARK:{mark}" in line: return i
    raise AssertionError(f"no MARK:{mark} in {script}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def watch_job(tmp_path, script: str, nproc: int, timeout_s: float = 90, args=(), **watcher_kw):
    "Run `script` on `nproc` ranks under the shim; poll a Watcher until it diagnoses; stop everything."
    run_id = f"test-watch-{uuid.uuid4().hex[:8]}"
    run_dir = tmp_path / run_id
    (run_dir / "logs").mkdir(parents=True)
    env = {**os.environ, "DISTLAB_RUN_DIR": str(run_dir), "DISTLAB_RUN_ID": run_id, "DISTLAB_BACKEND": "gloo",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
            "-m", "distlab.rank.shim", str(SCRIPTS / script), *args]
    with open(run_dir / "logs" / "torchrun.out", "wb") as out:
        proc = subprocess.Popen(argv, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    w = Watcher(run_dir, nproc, **watcher_kw)
    diag, end = None, time.monotonic() + timeout_s
    try:
        while diag is None and time.monotonic() < end:
            diag = w.poll()
            if diag is None and proc.poll() is not None: diag = w.poll(final=True); break
            time.sleep(0.2)
    finally:
        w.close()
        if proc.poll() is None: proc.terminate()
        kill_run(run_id, term_grace_s=0.5)
        try: proc.wait(timeout=10)
        except subprocess.TimeoutExpired: proc.kill(); proc.wait()
        gone_within(run_id)
    log = (run_dir / "logs" / "torchrun.out").read_text(errors="replace")
    assert diag is not None, f"no diagnosis; torchrun output:\n{log[-3000:]}"
    return diag, w, log


def test_uneven_batches_ddp_mismatch(tmp_path):
    "World 4: rank 3 runs one step fewer and reaches its barrier while ranks 0-2 all-reduce a DDP bucket."
    d, w, _ = watch_job(tmp_path, "ddp_uneven.py", 4)
    assert d.kind == "mismatch", d.text()
    assert d.culprit_ranks == [3]
    c = d.collective
    assert (c["op"], c["site"]) == ("all_reduce", f"ddp_uneven.py:{line_of('ddp_uneven.py', 'backward')}")
    assert (c["culprit_op"], c["culprit_site"]) == ("barrier", f"ddp_uneven.py:{line_of('ddp_uneven.py', 'barrier')}")
    assert f"collective #{c['seq']}" in d.headline and "drop_last" in d.fix
    assert c["seq"] == 5  # ddp_init is #1, then 3 steps' buckets: #5 is the 4th step's bucket on ranks 0-2


def test_uneven_batches_rank_that_left(tmp_path):
    "World 2, no barrier: rank 1 finishes one step early and exits while rank 0 waits in its DDP all-reduce."
    d, _, _ = watch_job(tmp_path, "ddp_uneven.py", 2, args=["--no-barrier"])
    assert d.kind == "stall" and d.culprit_ranks == [1], d.text()
    assert f"in all_reduce #5 (world) at ddp_uneven.py:{line_of('ddp_uneven.py', 'backward')}" in d.headline
    assert "rank 1 never entered it (rank 1: exited normally)" in d.headline


def test_shape_mismatch(tmp_path):
    d, _, _ = watch_job(tmp_path, "shape_mismatch.py", 2)
    assert d.kind == "mismatch" and d.culprit_ranks == [1], d.text()
    line = line_of("shape_mismatch.py", "mismatch")
    assert d.collective["site"] == d.collective["culprit_site"] == f"shape_mismatch.py:{line}"
    assert "[[4]]" in d.explanation and "[[5]]" in d.explanation


def test_rank_stuck_in_user_code_is_a_stall_with_its_stack(tmp_path):
    d, w, _ = watch_job(tmp_path, "sleeper.py", 2, stall_policy="strict")  # asleep on purpose: the safe policy waits 30 s
    assert d.kind == "stall" and d.culprit_ranks == [1], d.text()
    assert d.collective["op"] == "all_reduce" and d.collective["seq"] == 3
    assert f'sleeper.py", line {line_of("sleeper.py", "sleep")}' in d.stacks[1]
    assert "sleeper.py" in d.text() and "rank 1" in d.headline


def test_rank_that_raises(tmp_path):
    d, _, _ = watch_job(tmp_path, "raiser.py", 2)
    assert d.kind == "rank-died" and d.culprit_ranks == [1], d.text()
    assert "ValueError: bad batch on rank 1" in d.headline
    assert f"raiser.py:{line_of('raiser.py', 'raise')}" in d.headline


def test_rank_killed_by_sigkill(tmp_path):
    d, _, _ = watch_job(tmp_path, "killer.py", 2)
    assert d.kind == "rank-died" and d.culprit_ranks == [1], d.text()
    assert "SIGKILL" in d.headline
    assert f"all_reduce #2 (world) at killer.py:{line_of('killer.py', 'allreduce')}" in d.ranks[1]["last_completed"]


def test_world_size_larger_than_launched(tmp_path):
    d, _, _ = watch_job(tmp_path, "world_too_big.py", 2)
    assert d.kind == "never-joined" and d.culprit_ranks == [2, 3], d.text()
    assert f"world_too_big.py:{line_of('world_too_big.py', 'init')}" in d.headline


@pytest.mark.parametrize("arg", ["0", "3", "raise"])
def test_shim_changes_nothing_a_script_shows(tmp_path, arg):
    "stdout, stderr and exit code of a working (or failing) script are identical bare and under the shim."
    script = tmp_path / "well_behaved.py"
    script.write_text((SCRIPTS / "well_behaved.py").read_text())
    base = {**os.environ, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
            "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    runs = []
    for shim in (False, True):
        env = {**base, "MASTER_PORT": str(free_port())}
        if shim: env["DISTLAB_RUN_DIR"] = str(tmp_path / "run")
        argv = [sys.executable] + (["-m", "distlab.rank.shim"] if shim else []) + ["well_behaved.py", arg]
        runs.append(subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120))
    bare, shimmed = runs
    assert (shimmed.returncode, shimmed.stdout, shimmed.stderr) == (bare.returncode, bare.stdout, bare.stderr)
    assert bare.returncode == (1 if arg == "raise" else int(arg))
    events = (tmp_path / "run" / "events" / "rank0.jsonl").read_text()
    assert '"op": "all_reduce"' in events and '"ev": "exit"' in events
