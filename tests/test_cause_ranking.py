"""Which cause a mismatch's fix names first, on user scripts of several shapes launched as `distlab launch` does
(world 2, gloo): the rank test is found in any spelling and in any frame of the stack, and genuinely uneven batches
still come first. The pure source analysis, many shapes without ranks, is in nbs/28_hang_rules.ipynb.
At the end, the straggler cause on recorded plain-script runs: a rank is named only where the others' wait follows
its lateness (nbs/29a_perf_rules.ipynb)."""
import json, os, subprocess
from pathlib import Path
import pytest
from distlab.run.launch import launch
from helpers import gone_within

SCRIPTS = Path(__file__).parent / "scripts"


def line_of(script: str, mark: str) -> int:
    for i, line in enumerate((SCRIPTS / script).read_text().splitlines(), 1):
        if f"# MARK:{mark}" in line: return i
    raise AssertionError(f"no MARK:{mark} in {script}")


def diagnosis_of(tmp_path, script: str):
    run = launch(str(SCRIPTS / script), nproc=2, backend="gloo", runs_root=tmp_path, env={"OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)})  # a rank killed mid-run leaves its files there, not in /tmp
    res = run.wait(150)
    gone_within(run.run_id)
    d = res.diagnosis
    assert d is not None and d.kind == "mismatch", (res.status, d and d.text())
    print(f"{script}: {d.headline}\n  fix: {d.fix}")  # what the engineer reads, for the report
    return d


@pytest.mark.slow
def test_ddp_tutorial_barrier_on_rank_1_in_epoch_1(tmp_path):
    "PyTorch's DDP tutorial with `if int(os.environ[\"RANK\"]) == 1 and epoch == 1: barrier()`, through the CLI: the branch first, with its line, in what `distlab launch` prints."
    from test_cli import DISTLAB
    script = "cause_ddp_tutorial.py"
    p = subprocess.run(DISTLAB + ["launch", "--nproc", "2", str(SCRIPTS / script)], cwd=tmp_path,
                       env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=180)
    out = p.stdout + p.stderr
    print(out[out.find("Fix:"):out.find("Stack of")])  # what the engineer reads, for the report
    assert p.returncode == 3, out  # stopped by distlab after a diagnosis
    guard = f'{script}:{line_of(script, "barrier") - 1} `if int(os.environ["RANK"]) == 1 and epoch == 1:` branches on the rank'
    assert guard in " ".join(out.split()), out  # the text wraps: compare with whitespace collapsed
    fix = out.split("Fix:", 1)[1]
    assert "The ranks are at different places in the code" in fix.split("\n", 2)[1] and "uneven" not in fix, fix
    assert f"MISMATCH: rank 1 issued barrier" in out and f"{script}:{line_of(script, 'barrier')}" in out, out


@pytest.mark.slow
def test_get_rank_inside_a_longer_test_at_module_level(tmp_path):
    "`if step == 3 and dist.get_rank() == 0:` in a loop at module level, over a helper that all-reduces."
    script = "cause_get_rank_step.py"
    d = diagnosis_of(tmp_path, script)
    assert d.culprit_ranks == [0] and d.collective["culprit_site"] == f"{script}:{line_of(script, 'metric')}", d.text()
    assert d.collective["causes"][0] == "rank-conditional", d.fix
    assert f"{script}:{line_of(script, 'call') - 1} `if step == 3 and dist.get_rank() == 0:` branches on the rank" in d.fix, d.fix
    assert f"line {line_of(script, 'call')} calls mean_over_ranks()" in d.fix, d.fix  # from the stack, or the file's callers when gloo aborted rank 0
    assert "uneven" not in d.fix and "branches on the rank" in d.text(), d.text()  # the text that the lab and `distlab launch` show


@pytest.mark.slow
def test_rank_test_two_calls_above_the_collective(tmp_path):
    "sync_stats() waits in a barrier; log_metrics() calls it as a callback; train() calls that under `if args.rank == 0 and ...`: read from rank 0's live stack."
    script = "cause_helper_two_up.py"
    d = diagnosis_of(tmp_path, script)
    assert d.culprit_ranks == [0] and d.collective["culprit_site"] == f"{script}:{line_of(script, 'barrier')}", d.text()
    assert d.collective["causes"][0] == "rank-conditional", d.fix
    assert f"{script}:{line_of(script, 'log') - 1} `if args.rank == 0 and step % args.log_every == 1:` branches on the rank" in d.fix, d.fix
    assert f"line {line_of(script, 'log')} calls log_metrics(), which leads to the call at {script}:{line_of(script, 'barrier')}" in d.fix, d.fix
    assert "uneven" not in d.fix and d.collective["frames_from"]["0"] == "stack", d.collective


@pytest.mark.slow
def test_early_return_of_an_is_main_process_helper(tmp_path):
    "`if not is_main_process(): return`, then a barrier that only rank 0 reaches."
    script = "cause_main_process_helper.py"
    d = diagnosis_of(tmp_path, script)
    assert d.culprit_ranks == [0] and d.collective["culprit_site"] == f"{script}:{line_of(script, 'barrier')}", d.text()
    assert d.collective["causes"][0] == "rank-conditional", d.fix
    assert "`if not is_main_process():` leaves early on some ranks" in d.fix and "uneven" not in d.fix, d.fix


@pytest.mark.slow
def test_genuinely_uneven_batches_still_come_first(tmp_path):
    "Unequal hand-made shards: rank 1 leaves its loop and all-reduces the epoch loss; an `if rank == 0:` print nearby misleads nobody."
    script = "cause_uneven_user_loop.py"
    d = diagnosis_of(tmp_path, script)
    assert d.culprit_ranks == [1] and d.collective["culprit_site"] == f"{script}:{line_of(script, 'epoch_loss')}", d.text()
    assert d.collective["causes"][0] == "uneven-batches", d.fix
    assert d.fix.startswith("The ranks ran different numbers of steps (uneven batches)") and "drop_last" in d.fix, d.fix
    assert f"comes after the loop of lines" in d.fix and "no rank test above either call" in d.fix, d.fix


# The straggler rule on a plain script: a rank named only where the others' wait follows its lateness, step by step.
# Recorded runs (tests/fixtures/recorded/<name>/: events/rank*.jsonl, and the script with how it was recorded).
RECORDED = Path(__file__).parent / "fixtures" / "recorded"


def recorded_tracks(name: str):
    from distlab.watch.analysis import read_rank_events, tracks_from_events
    return tracks_from_events({r: read_rank_events(RECORDED / name, r) for r in (0, 1)})


def test_a_late_rank_that_waits_for_the_others_is_not_a_straggler():
    "Rank 1 under the lesson's 0.25-core quota, 21 of 1024 samples and a fixed busy loop after its optimizer step: late into backward every step, though rank 0's 1003 samples set the step."
    from distlab.watch.perf_rules import ddp_breakdown, is_straggler, STRAGGLER_MIN_RATIO, STRAGGLER_MIN_LOST_SHARE
    from distlab.watch.rules import diagnose
    from distlab.watch.steps import straggler
    tracks = recorded_tracks("straggler-fixed-cost")
    s = straggler(ddp_breakdown(tracks))
    # the estimate from the time outside backward gives rank 1 the whole step as compute: that alone named it
    assert s.rank == 1 and s.ratio >= STRAGGLER_MIN_RATIO and s.lost_share >= STRAGGLER_MIN_LOST_SHARE, s
    assert s.others_wait_s - s.own_wait_s >= 0.5 * s.lost_s, s
    a = s.arrivals
    assert a.rank == 1 and a.last_steps >= 0.8 * a.steps and a.gap_s > 0.3 * s.step_s, a  # last into backward, by far
    assert a.held is not None and a.held < 0.2, a  # and yet the others' time in backward does not follow its lateness
    assert not is_straggler(s)
    assert diagnose(tracks, 2, final=True, advisory=True) is None
    live = straggler(ddp_breakdown(tracks, last=30))  # what the watcher judges while the run trains
    assert live.arrivals.held is not None and live.arrivals.held < 0.5 and not is_straggler(live), live


def test_a_rank_with_most_of_the_batch_is_named_with_its_arrivals():
    "Rank 0 trains 1003 of 1024 samples a step, rank 1 (under the quota) 21: rank 0 is named, and the headline says what showed the others wait for it."
    from distlab.watch.rules import diagnose
    d = diagnose(recorded_tracks("straggler-more-samples"), 2, final=True, advisory=True)
    assert d is not None and (d.kind, d.culprit_ranks) == ("straggler", [0]), d and d.text()
    assert d.headline.startswith("rank 0 computes ") and "the job loses" in d.headline, d.headline
    assert "it enters backward last in 38 of 38 steps" in d.headline and "100% of that lateness adds to their time in backward" in d.headline, d.headline


def test_the_straggler_lessons_recorded_runs_broken_named_fixed_not():
    "The lesson's broken run names rank 1 at several times rank 0's compute, with the arrivals that show rank 0 waits for it; its fixed run names no one."
    from distlab.watch.rules import diagnose
    d = diagnose(recorded_tracks("straggler-lesson-broken"), 2, final=True, advisory=True)
    assert d is not None and (d.kind, d.culprit_ranks) == ("straggler", [1]), d and d.text()
    ratio = float(d.headline.split("per step, ", 1)[1].split("x the others'", 1)[0])
    assert ratio >= 3, d.headline  # 3.4x: the quota's 0.25 cores against a core
    assert "it enters backward last in 38 of 38 steps" in d.headline and "of that lateness adds to their time in backward" in d.headline, d.headline
    assert diagnose(recorded_tracks("straggler-lesson-fixed"), 2, final=True, advisory=True) is None
