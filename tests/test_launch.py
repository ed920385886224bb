"""The launcher on real torchrun ranks: results, logs, and no orphans after stop, timeout, or the launcher's death."""
import json, os, signal, subprocess, sys, textwrap, time
from pathlib import Path
import pytest
from distlab.run.launch import launch
from distlab.config import ConfigError
from helpers import wait_for, survivors, gone_within

SCRIPTS = Path(__file__).parent / "scripts"

def ready_ranks(run_dir: Path, n: int) -> bool:
    logs = [run_dir / "logs" / f"rank{r}.stdout" for r in range(n)]
    return all(p.exists() and "ready" in p.read_text() for p in logs)

def test_stop_leaves_no_process(tmp_path):
    run = launch(SCRIPTS / "sleepy_ranks.py", nproc=2, runs_root=tmp_path, watch=False)
    wait_for(lambda: ready_ranks(run.run_dir, 2), 90, what="both ranks ready")
    assert len(survivors(run.run_id)) >= 5  # torchrun + 2 ranks + 2 DataLoader workers
    res = run.stop()
    assert res.status == "stopped"
    gone_within(run.run_id, 5)
    assert json.loads((run.run_dir / "result.json").read_text())["status"] == "stopped"

def test_timeout_leaves_no_process(tmp_path):
    run = launch(SCRIPTS / "sleepy_ranks.py", nproc=2, runs_root=tmp_path, watch=False, timeout_s=20)
    res = run.wait()
    assert res.status == "timeout"
    gone_within(run.run_id, 5)

def test_wait_deadline_stops_the_run(tmp_path):
    run = launch(SCRIPTS / "sleepy_ranks.py", nproc=2, runs_root=tmp_path, watch=False)
    wait_for(lambda: ready_ranks(run.run_dir, 2), 90, what="both ranks ready")
    assert run.wait(timeout_s=0.5).status == "timeout"
    gone_within(run.run_id, 5)

def test_sigkill_of_the_launching_process_leaves_no_process(tmp_path):
    code = textwrap.dedent(f"""
        import sys, time
        from distlab.run.launch import launch
        run = launch({str(SCRIPTS / 'sleepy_ranks.py')!r}, nproc=2, runs_root={str(tmp_path)!r}, watch=False)
        print(run.run_id, run.run_dir, flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    run_id, run_dir = parent.stdout.readline().split()
    wait_for(lambda: ready_ranks(Path(run_dir), 2), 90, what="both ranks ready")
    assert len(survivors(run_id)) >= 5
    parent.send_signal(signal.SIGKILL); parent.wait()
    gone_within(run_id, 5)

def test_failing_rank_is_reported_with_its_traceback(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text(textwrap.dedent("""
        import torch.distributed as dist
        dist.init_process_group("gloo")
        if dist.get_rank() == 1:
            raise RuntimeError("bad batch on rank 1")
        dist.barrier()
    """))
    res = launch(script, nproc=2, runs_root=tmp_path, watch=False).wait(120)
    assert res.status == "failed"
    assert res.failure["rank"] == 1 and res.exit_codes[1] == 1
    assert "bad batch on rank 1" in (run_stderr := (Path(res.run_dir) / "logs" / "rank1.stderr").read_text()), run_stderr
    gone_within(res.run_id, 5)

def test_bad_input_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        launch(tmp_path / "missing.py", runs_root=tmp_path)
    with pytest.raises(ConfigError) as e:
        launch("x", module=True, nproc=0, backend="nccl2", runs_root=tmp_path)
    assert "nproc=0" in str(e.value) and "backend='nccl2'" in str(e.value)
    assert not any(tmp_path.iterdir())  # no half-made run directory
