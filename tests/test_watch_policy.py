"""What the engineer reads is right, on scripts written like a user's, launched as `distlab launch` does (world 2):
the safe stall policy leaves busy or asleep rank-only work alone and still names a stuck rank; stacks appear;
a fix follows the evidence; an exit code is not taken for a signal."""
import os, time
from pathlib import Path
import pytest
from distlab.run.launch import launch
from helpers import gone_within

SCRIPTS = Path(__file__).parent / "scripts"


def line_of(script: str, mark: str) -> int:
    for i, line in enumerate((SCRIPTS / script).read_text().splitlines(), 1):
        if f"# MARK:{mark}" in line: return i
    raise AssertionError(f"no MARK:{mark} in {script}")


def run_script(tmp_path, script: str, timeout_s: float = 150, **kw):
    run = launch(str(SCRIPTS / script), nproc=2, backend="gloo", runs_root=tmp_path, env={"OMP_NUM_THREADS": "1"}, **kw)
    res = run.wait(timeout_s)
    gone_within(run.run_id)
    return res


def logs(res, rank: int) -> str:
    return (Path(res.run_dir) / "logs" / f"rank{rank}.stdout").read_text()


@pytest.mark.parametrize("script", ["busy_checkpoint.py", "asleep_io.py"])
def test_rank_only_work_is_not_a_hang(tmp_path, script):
    "Rank 0 busy 12 s (CPU) or asleep 10 s (I/O) between two barriers: the run ends ok, as under bare torchrun."
    res = run_script(tmp_path, script)
    assert res.diagnosis is None, res.diagnosis.text()
    assert (res.status, res.exit_code) == ("ok", 0)
    assert all(f"rank {r} done" in logs(res, r) for r in range(2))


def test_stuck_rank_is_a_stall_with_its_stack(tmp_path):
    "Rank 1 waits forever on an Event: under the default (safe) policy, a stall naming rank 1, with its stack."
    res = run_script(tmp_path, "stuck_event.py")
    d = res.diagnosis
    assert res.status == "hung" and d.kind == "stall" and d.culprit_ranks == [1], d.text() if d else res
    waited = float(d.headline.split(" waited ")[1].split(" s ")[0])
    print(f"stuck rank diagnosed after rank 0 waited {waited} s")  # figure for the report
    text = d.text()
    assert "Stack of rank 1" in text and f"stuck_event.py\", line {line_of('stuck_event.py', 'wait')} in wait_for_signal" in text, text


def test_exit_code_is_not_a_signal(tmp_path):
    res = run_script(tmp_path, "exit_code7.py")
    d = res.diagnosis
    assert d.kind == "rank-died" and d.culprit_ranks == [1], d.text()
    assert "exited with code 7 without an exit event" in d.headline and "SIGKILL" not in d.headline, d.headline
    assert res.status == "failed" and res.exit_codes[1] == 7, (res.status, res.exit_codes)  # torchrun's code, kept


def test_barrier_under_if_rank_gets_the_branch_fix(tmp_path):
    res = run_script(tmp_path, "barrier_if_rank.py")
    d = res.diagnosis
    assert d.kind == "mismatch" and d.culprit_ranks == [1], d.text()
    assert d.collective["culprit_site"] == f"barrier_if_rank.py:{line_of('barrier_if_rank.py', 'barrier')}"
    assert "if rank == 1:" in d.fix and "uneven batches" not in d.fix, d.fix


def test_strict_policy_from_the_command_line_stops_rank_only_work(tmp_path):
    "The asleep_io.py run that finishes under the safe policy (above) is a stall under `distlab launch --stall-policy strict`."
    import json, subprocess, sys
    from test_cli import DISTLAB
    p = subprocess.run(DISTLAB + ["launch", "--stall-policy", "strict", "--json", str(SCRIPTS / "asleep_io.py")], cwd=tmp_path,
                       env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=150)
    assert p.returncode == 3, p.stdout + p.stderr  # stopped by distlab, as `distlab launch` says for a hang
    res = json.loads(p.stdout)
    d = res["diagnosis"]
    assert (res["status"], d["kind"], d["culprit_ranks"]) == ("hung", "stall", [0]), d["headline"]
    out = Path(res["run_dir"]) / "logs" / "rank0.stdout"
    assert not out.exists() or "rank 0 done" not in out.read_text()  # stopped while asleep in its I/O
    assert json.loads((Path(res["run_dir"]) / "run.json").read_text())["config"]["stall_policy"] == "strict"
    gone_within(res["run_id"])
