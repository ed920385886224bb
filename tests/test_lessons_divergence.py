"""The divergence lessons (distlab.scenarios.divergence) on real ranks at world 2: each broken script is diagnosed
with its kind, culprit rank and the script's own lines, each fixed script trains clean, and the grader takes a
second, different fix and refuses a non-fix with the watcher's reason. The broken and fixed runs are walkthroughs 01's
and 04's (made once per session); the 7 learner tries under tests/fixes/<id>/ go two at a time."""
from pathlib import Path
import pytest
from distlab.scenarios import SCENARIOS
from distlab.scenarios.divergence import DIVERGENCE
from helpers import assert_ran, assert_verdict, lesson_runs, line_of

FIXES = Path(__file__).parent / "fixes"
NPROC = 2
# (scenario, a learner's script, passes?, what the verdict must say)
TRIES = [
    ("oom-retry-alone", "small_from_the_start.py", True, ""),  # every rank starts at a micro-batch the small card takes
    ("oom-retry-alone", "longer_timeout.py", False, "still hangs"),  # a 2-hour process-group timeout: the same hang, longer
    ("caught-reduction-error", "mask_the_loss.py", True, ""),  # the classifier on every sample, its loss masked
    ("caught-reduction-error", "barrier_in_except.py", False, "still hangs"),  # guide 003's synchronize_all_ranks() in the except
    ("random-extra-collective", "broadcast_decision.py", True, ""),  # rank 0's coin, broadcast
    ("data-dependent-branch", "weight_by_flag.py", True, ""),  # the head always runs, weighted by the 0/1 decision
    ("data-dependent-branch", "skip_the_step.py", False, "at least 6 steps"),  # catch the errors and skip: nothing trained
]

pytestmark = pytest.mark.timeout(900)


def test_the_tries_cover_two_fixes_and_a_non_fix_of_two_scenarios():
    assert set(DIVERGENCE) <= set(SCENARIOS) and all((FIXES / s / n).is_file() for s, n, _, _ in TRIES)
    both = [sid for sid in DIVERGENCE if {p for s, _, p, _ in TRIES if s == sid} == {True, False}]
    assert len(both) >= 2, both


WALKTHROUGH = {"hangs": "01_hangs_and_mismatches", "numerics": "04_numerics"}  # where each family's runs are made


@pytest.fixture(scope="module")
def runs(walkthroughs, tmp_path_factory):
    "Every variant of every divergence scenario (the walkthroughs' runs, made once per session) and every try on 2 real gloo ranks, two at a time."
    root = tmp_path_factory.mktemp("divergence")
    stems = sorted({WALKTHROUGH[SCENARIOS[sid].family] for sid in DIVERGENCE})
    return lesson_runs(walkthroughs, stems, DIVERGENCE, TRIES, root, FIXES, NPROC, variants=("broken", "fixed"))


def _sides(d):
    c = d.get("collective") or {}
    return c.get("culprit_op"), c.get("culprit_site"), c.get("op"), c.get("site")


# what each broken run must show beyond its Expect (status, kind, culprit ranks): the lines of the script
def check_oom(o):
    d = o.diagnosis
    assert _sides(d) == ("barrier", line_of("oom-retry-alone", "dist.barrier()"),
                         "all_reduce", line_of("oom-retry-alone", "loss.backward()")), _sides(d)
    assert o.steps_per_rank == {0: 5, 1: 5}, o.steps_per_rank  # rank 1 dropped a step: one all-reduce short

def check_caught(o):
    d = o.diagnosis
    assert _sides(d) == ("barrier", line_of("caught-reduction-error", "dist.barrier()"),
                         "all_reduce", line_of("caught-reduction-error", "loss.backward()")), _sides(d)

def check_random(o):
    d = o.diagnosis
    assert _sides(d) == ("all_reduce", line_of("random-extra-collective", "dist.all_reduce(mean)"),
                         "all_reduce", line_of("random-extra-collective", "loss.backward()")), _sides(d)
    assert "[[]]" in d["headline"] and o.steps_per_rank == {0: 3, 1: 3}, (d["headline"], o.steps_per_rank)  # parted at step 2

def check_branch(o):
    d = o.diagnosis
    assert "Expected to have finished reduction" in d["headline"] and o.failure["rank"] == 1, d["headline"]
    assert f"at {line_of('data-dependent-branch', 'loss = nn.functional.cross_entropy(')}" in d["headline"], d["headline"]

CHECKS = {"oom-retry-alone": check_oom, "caught-reduction-error": check_caught,
          "random-extra-collective": check_random, "data-dependent-branch": check_branch}


@pytest.mark.slow
@pytest.mark.parametrize("sid", DIVERGENCE)
def test_broken_is_diagnosed_at_the_scripts_line(runs, sid):
    o = runs["run", sid, "broken"]
    assert o.matched, f"{o.problems}\n{o.diagnosis_text}"
    assert o.diagnosis["culprit_ranks"] == list(SCENARIOS[sid].variants["broken"].expect.culprit_ranks(NPROC))
    CHECKS[sid](o)


@pytest.mark.slow
@pytest.mark.parametrize("sid", DIVERGENCE)
def test_fixed_trains_clean(runs, sid):
    o = runs["run", sid, "fixed"]
    assert o.matched and o.diagnosis is None, f"{o.problems}\nfailure: {o.failure}\n{o.diagnosis_text or ''}"
    assert_ran(o.run_dir, SCENARIOS[sid].script_path("fixed"))  # the shown script is what ran


@pytest.mark.slow
@pytest.mark.parametrize("sid,name,passes,says", TRIES, ids=[f"{c[0]}/{c[1]}" for c in TRIES])
def test_the_grader_takes_another_fix_and_refuses_a_non_fix(runs, sid, name, passes, says):
    v = runs["try", sid, name]
    assert_verdict(v, passes, says, FIXES / sid / name)
    if says == "still hangs": assert v.outcome.diagnosis is not None and "rank" in v.reasons[0], v.text()  # the watcher's who and where
