"""collective-wrong-device (distlab.scenarios.wrong_device): a metric summed with `dist.all_reduce` on a tensor left on
the CPU, under an nccl group. It needs a CUDA GPU, so it has two halves:

- everywhere (CI on CPU): `distlab run` and `distlab try` say in one line that it is not run here and exit 77, before
  anything is launched or written; `distlab show` prints the script with its BUG line. On a GPU machine the same is
  checked with CUDA hidden from the command (CUDA_VISIBLE_DEVICES="").
- marked `gpu` (skipped where torch sees no CUDA GPU): the broken and fixed scripts at world 1 on nccl, each matching
  its Expect, and learners' tries (tests/fixes/collective-wrong-device/) graded: a fix that keeps the host tensor and
  gives the group a gloo backend for it ("cpu:gloo,cuda:nccl") passes; `init_process_group()` with no backend, a fix
  only before torch 2.6 (since then it makes nccl alone on a CUDA machine), and a try/except that keeps each rank's
  own counts, are refused.
  World 2 runs only where there are two GPUs (nccl takes one rank per GPU).
"""
import os, subprocess, sys
from pathlib import Path
import pytest
from distlab.scenarios import SCENARIOS
from helpers import assert_ran, assert_verdict, gone_within, line_of, traceback_line

SID = "collective-wrong-device"
FIXES = Path(__file__).parent / "fixes"
ROOT = Path(__file__).resolve().parents[1]
# (a learner's script, passes?, what the verdict must say)
def _torch_before(major: int, minor: int) -> bool:
    import torch
    return tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) < (major, minor)

# torch 2.0-2.5 made gloo and nccl for init_process_group() with no backend; 2.6+ makes the accelerator's alone (nccl)
OLD_DEFAULT_PAIR = _torch_before(2, 6)
TRIES = [
    ("gloo_for_cpu.py", True, ""),         # init_process_group("cpu:gloo,cuda:nccl"): gloo reduces the host tensor
    ("default_backends.py", OLD_DEFAULT_PAIR,  # init_process_group() with no backend: nccl alone since torch 2.6
     "" if OLD_DEFAULT_PAIR else "No backend type associated with device type cpu"),
    ("try_except.py", False, "never went through a collective"),  # each rank prints its own counts as the job's
]


def distlab(*args, cwd, hide_cuda: bool) -> subprocess.CompletedProcess:
    "Run the `distlab` command of this interpreter in `cwd`, its runs under `cwd/runs`; `hide_cuda`: with no GPU visible to torch."
    env = {**os.environ, "DISTLAB_RUNS_ROOT": str(cwd / "runs")}
    if hide_cuda: env["CUDA_VISIBLE_DEVICES"] = ""
    return subprocess.run([sys.executable, "-m", "distlab.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _cuda_here() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception: return False


def test_without_a_gpu_run_and_try_say_why_exit_77_and_leave_nothing(tmp_path):
    "Not run here: one line naming what it needs, exit 77 (a harness's 'skipped'), no run directory, no rank started."
    hide = _cuda_here()  # on a GPU machine: the same with CUDA hidden from torch
    for args in (["run", SID], ["run", SID, "--variant", "fixed"], ["try", SID, str(FIXES / SID / "gloo_for_cpu.py")]):
        p = distlab(*args, cwd=tmp_path, hide_cuda=hide)
        assert p.returncode == 77, (args, p.returncode, p.stdout, p.stderr)
        said = [l for l in p.stderr.splitlines() if l.startswith("distlab: ")]  # (a library's warning may come before it)
        assert len(said) == 1 and said[0].startswith(f"distlab: {SID} (") and "not run: needs a CUDA GPU (" in said[0], p.stderr
        assert "run it on a machine with an NVIDIA GPU" in said[0], said
    assert not (tmp_path / "runs").exists(), sorted(p.name for p in (tmp_path / "runs").rglob("*"))
    assert not list(tmp_path.iterdir()), sorted(tmp_path.iterdir())  # no distlab-runs/ either, nor anything else


def test_show_prints_the_script_with_its_bug_line(tmp_path):
    p = distlab("show", SID, cwd=tmp_path, hide_cuda=False)
    assert p.returncode == 0, p.stderr
    bug = next(l for l in p.stdout.splitlines() if "# BUG" in l)
    assert bug.startswith(">>") and "counts = torch.tensor([correct, STEPS * BATCH])" in bug, bug
    assert 'dist.init_process_group("nccl")' in p.stdout and "distlab launch --nproc-per-node 1 broken.py" in p.stdout
    fix = distlab("show", SID, "--variant", "fixed", cwd=tmp_path, hide_cuda=False).stdout
    assert "+        counts = torch.tensor([correct, STEPS * BATCH], device=device)  # FIX:" in fix, fix


def test_the_catalogue_marks_it_gpu_only_and_the_tries_exist():
    s = SCENARIOS[SID]
    assert s.needs_gpu and s.family == "hangs" and (s.default_nproc, s.min_nproc) == (1, 1)
    assert all(v.needs_gpu and v.min_nproc == 1 for v in s.variants.values())
    assert all((FIXES / SID / name).is_file() for name, _, _ in TRIES)


# --- on a GPU: the scripts on real nccl ranks

def _run(tmp_path, variant: str, nproc: int = 1):
    from distlab.scenarios.runner import run_scenario
    o = run_scenario(SID, variant, nproc=nproc, backend="nccl", runs_root=tmp_path, timeout_s=120)
    gone_within(Path(o.run_dir).name)
    assert_ran(o.run_dir, SCENARIOS[SID].script_path(variant), nproc)
    return o


@pytest.mark.gpu
@pytest.mark.timeout(240)
def test_broken_dies_at_the_all_reduce_named_by_its_signature(tmp_path):
    o = _run(tmp_path, "broken")
    assert o.matched, (o.problems, o.failure, o.diagnosis_text)
    d = o.diagnosis
    assert d["kind"] == "rank-died" and d["culprit_ranks"] == [0], d["headline"]
    assert f"at {line_of(SID, 'dist.all_reduce(counts)')}" in d["headline"], d["headline"]
    assert "No backend type associated with device type cpu" in d["headline"], d["headline"]
    assert d["collective"]["enriched_by"] == "signatures:collective-wrong-device", d["collective"]
    assert traceback_line(SID, "dist.all_reduce(counts)") in o.failure["traceback"], o.failure
    assert o.steps_per_rank == {0: 4}, o.steps_per_rank  # the first epoch's steps ran; its end is where it fails
    assert o.figures["failed_at"] == line_of(SID, "dist.all_reduce(counts)") and o.figures["ranks_that_printed_sums"] == []


@pytest.mark.gpu
@pytest.mark.timeout(240)
def test_fixed_sums_the_counts_on_the_gpu(tmp_path):
    o = _run(tmp_path, "fixed")
    assert o.matched, (o.problems, o.failure, o.figures)
    assert o.diagnosis is None and o.steps_per_rank == {0: 8}, (o.diagnosis, o.steps_per_rank)
    sums = o.figures["sums"][0]
    assert len(sums) == 2 and all(s.endswith("/256") for s in sums), sums
    assert o.figures["metric_collectives"] == {0: 2}, o.figures


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name,passes,says", TRIES, ids=[t[0] for t in TRIES])
def test_the_grader_takes_a_fix_and_refuses_a_non_fix(tmp_path, name, passes, says):
    from distlab.scenarios.lesson import try_fix
    v = try_fix(SID, FIXES / SID / name, nproc=1, backend="nccl", runs_root=tmp_path, timeout_s=120)
    assert_verdict(v, passes, says, FIXES / SID / name)
    if passes: assert v.outcome.figures["metric_collectives"] == {0: 2}, v.outcome.figures
    gone_within(Path(v.outcome.run_dir).name)


@pytest.mark.gpu
@pytest.mark.timeout(300)
def test_two_ranks_on_two_gpus_sum_over_both(tmp_path):
    import torch
    if torch.cuda.device_count() < 2: pytest.skip("two nccl ranks need two GPUs (the lesson scripts put rank r on cuda:r)")
    broken, fixed = _run(tmp_path, "broken", 2), _run(tmp_path, "fixed", 2)
    assert broken.matched and fixed.matched, (broken.problems, fixed.problems)
    assert set(fixed.figures["sums"]) == {0, 1} and fixed.figures["sums"][0] == fixed.figures["sums"][1], fixed.figures
    assert all(s.endswith("/512") for s in fixed.figures["sums"][0]), fixed.figures
