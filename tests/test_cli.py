"""The `distlab` command as a user runs it: scenario outcomes as JSON, exit codes, no process left behind."""
import json, os, subprocess, sys, shutil
from pathlib import Path
import pytest
from helpers import gone_within

REPO = Path(__file__).resolve().parents[1]
_EXE = Path(sys.executable).parent / "distlab"  # the console script pip installed beside this python
DISTLAB = [str(_EXE)] if _EXE.exists() else [sys.executable, "-m", "distlab.cli"]

def distlab(*args, cwd, timeout=300):
    return subprocess.run(DISTLAB + [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout)

def test_list_names_every_scenario(tmp_path):
    p = distlab("list", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    ids = [r["id"] for r in rows]
    assert "uneven-batches" in ids
    assert all(r["variants"]["broken"]["expected_status"] and r["symptom"] for r in rows)

@pytest.mark.slow
def test_uneven_batches_broken_is_diagnosed_as_a_hang_and_stopped(tmp_path):
    p = distlab("run", "uneven-batches", "--variant", "broken", "--nproc", 4, "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout)
    assert out["status"] == "hung" and out["matched"] is True, out["problems"]
    d = out["diagnosis"]
    assert d["culprit_ranks"] == [3]                       # the rank that ran out of batches
    assert out["steps_per_rank"]["3"] == out["steps_per_rank"]["0"]  # it finished all of its batches ...
    states = {int(k): v for k, v in d["ranks"].items()} if isinstance(d["ranks"], dict) else {r["rank"]: r for r in d["ranks"]}
    assert "barrier" in json.dumps(states[3]) and "all_reduce" in json.dumps(states[0])  # ... and waits in the barrier
    assert Path(out["run_dir"], "result.json").exists()
    gone_within(Path(out["run_dir"]).name, 5)

@pytest.mark.slow
def test_uneven_batches_fixed_runs_equal_steps(tmp_path):
    p = distlab("run", "uneven-batches", "--variant", "fixed", "--nproc", 4, "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout)
    assert out["status"] == "ok" and out["matched"] is True and out["diagnosis"] is None
    steps = set(out["steps_per_rank"].values())
    assert len(steps) == 1 and steps.pop() > 0
    gone_within(Path(out["run_dir"]).name, 5)

def test_unknown_scenario_and_bad_arguments_fail_fast_with_the_fix(tmp_path):
    p = distlab("run", "no-such-thing", cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and "uneven-batches" in p.stderr
    p = distlab("run", "uneven-batches", "--nproc", 1, cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and "nproc>=2" in p.stderr
    p = distlab("launch", "missing_script.py", cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and "not found" in p.stderr
    assert not (tmp_path / "distlab-runs").exists() or not any((tmp_path / "distlab-runs").iterdir())

def test_ci_fails_when_a_notebook_and_its_export_disagree(tmp_path):
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        if (REPO / f).is_file():
            (tmp_path / f).parent.mkdir(parents=True, exist_ok=True); shutil.copy2(REPO / f, tmp_path / f)
    git = ["git", "-c", "user.email=t@t.invalid", "-c", "user.name=t"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "copy"]):
        subprocess.run(git + cmd, cwd=tmp_path, check=True, capture_output=True)
    env = {**os.environ, "NBDEV_BIN": str(Path(sys.executable).parent)}
    ok = subprocess.run(["bash", "scripts/check_sync.sh"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    lib = tmp_path / "distlab" / "guards.py"
    lib.write_text(lib.read_text().replace("def check_step_counts", "def check_step_counts_edited_by_hand"))
    bad = subprocess.run(["bash", "scripts/check_sync.sh"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert bad.returncode == 1 and "distlab/train/guards.py" in bad.stdout, bad.stdout + bad.stderr

SCRIPTS = Path(__file__).parent / "scripts"

def _rank_lines(text: str) -> list[str]:
    "What the ranks printed (torchrun's banner left out). Bare torchrun can run two ranks' lines together, so match records, not lines."
    import re
    return sorted(re.findall(r"rank \d+(?:: \[[^\]]*\]| says hello on stderr)", text))

@pytest.mark.slow
@pytest.mark.parametrize("exit_code", [0, 7])
def test_launch_matches_bare_torchrun_on_a_script_that_works(tmp_path, exit_code):
    bare = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone",
                           str(SCRIPTS / "user_ok.py"), str(exit_code)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    ours = distlab("launch", "--nproc", 2, SCRIPTS / "user_ok.py", exit_code, cwd=tmp_path, timeout=120)
    assert ours.returncode == bare.returncode == (0 if exit_code == 0 else 1)  # torchrun reports a failed rank as 1
    assert _rank_lines(ours.stdout) == _rank_lines(bare.stdout) == ["rank 0: [0.0, 3.0, 6.0, 9.0]", "rank 1: [0.0, 3.0, 6.0, 9.0]"]
    assert _rank_lines(ours.stderr) == ["rank 0 says hello on stderr", "rank 1 says hello on stderr"]
    assert [l for l in bare.stderr.splitlines() if "says hello" in l] != []  # bare torchrun shows it too

@pytest.mark.slow
def test_launch_diagnoses_a_users_rank_conditional_collective(tmp_path):
    p = distlab("launch", "--nproc", 2, "--json", SCRIPTS / "user_ddp_eval_on_rank0.py", "--steps", 6, cwd=tmp_path, timeout=180)
    assert p.returncode == 3, p.stdout + p.stderr   # stopped by distlab after a diagnosis
    res = json.loads(p.stdout)
    d = res["diagnosis"]
    assert res["status"] == "hung" and d["culprit_ranks"] == [0], d
    text = d["explanation"] + json.dumps(d["ranks"])
    assert "all_reduce" in text
    assert d["collective"]["culprit_site"] == "user_ddp_eval_on_rank0.py:24", d["collective"]  # the all_reduce in validate()
    assert "if rank == 0" in d["fix"] and "user_ddp_eval_on_rank0.py:32" in d["fix"], d["fix"]  # a control-flow fix, not a shape one
    gone_within(res["run_id"], 5)
