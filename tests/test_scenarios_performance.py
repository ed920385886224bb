"""The performance lessons (distlab.scenarios.performance) on real torchrun ranks at world 2, the walkthrough's runs read
again here: each broken script is slow in the way its scenario says under the real limit its launch makes (the last
rank under a CPU quota is named as the straggler; ranks reading from a throttled volume wait for data; threads
outnumber the cores), each fixed script is measurably better, what ran is what the lesson shows, and nothing the
limits made is left. Two learner tries: another fix passes, a non-fix is refused with the reason. (tests/fixes/straggler/forward_timing.py,
a re-split by the forward passes' own times, is not among them: the clean-clone CI of 2026-11-26 refused it, rank 1
still 2.4x slower under the quota; it waits for a look.)"""
from pathlib import Path
import hashlib, time
import pytest
from distlab.scenarios import SCENARIOS, unmet_needs
from distlab.scenarios.lesson import ran_hashes, try_fix
from distlab.run.limits import leftovers
from helpers import gone_within

NPROC = 2
FIXES = Path(__file__).parent / "fixes"
LESSONS = ["dataloader-bottleneck", "oversubscribed-threads", "straggler"]
PERFORMANCE = sorted(s.id for s in SCENARIOS.values() if s.family == "performance" and s.variants["broken"].expect.checks
                     and s.variants["broken"].expect.checks[0].startswith("distlab.scenarios.performance:"))
TRIES = [  # (scenario, a learner's script, passes?, what the verdict must say)
    ("dataloader-bottleneck", "four_workers.py", True, ""),  # 4 persistent workers, the default prefetch
    ("dataloader-bottleneck", "pin_memory.py", False, "still wait for data"),  # pinned memory: no worker reads ahead
]
NOTHING = {"cgroups": [], "mounts": [], "loops": [], "volumes": [], "state": []}


def limits_gone_within(seconds: float = 15.0) -> dict:
    "Poll until no limits are left on this machine (a run releases them as it ends, just after `wait` returns); what is left."
    end = time.monotonic() + seconds
    while (left := leftovers()) != NOTHING and time.monotonic() < end: time.sleep(0.1)
    return left

pytestmark = pytest.mark.timeout(900)  # the first test here may be the one that runs the walkthrough


@pytest.fixture(scope="module")
def outcomes(walkthroughs):
    "Every lesson of this module, broken and fixed, at world 2: the runs of examples/02_performance.ipynb (one per variant)."
    out = {k: o for k, o in walkthroughs.by_variant("02_performance").items() if k[0] in PERFORMANCE}
    assert set(out) == {(sid, v) for sid in PERFORMANCE for v in ("broken", "fixed")}, sorted(out)
    for o in out.values(): gone_within(Path(o.run_dir).name)
    return out


def test_the_family_is_registered_as_lessons():
    assert PERFORMANCE == LESSONS
    for sid in LESSONS:
        assert SCENARIOS[sid].has_lesson and SCENARIOS[sid].rank_fn is None, sid
    assert [sid for sid in LESSONS if SCENARIOS[sid].needs_root] == ["dataloader-bottleneck", "straggler"]


def test_without_root_the_limited_lessons_are_not_run_with_the_reason():
    for sid in ("straggler", "dataloader-bottleneck"):
        why = unmet_needs(SCENARIOS[sid], euid=1000, status="CapEff:\t0000000000000000\n")
        assert why.startswith(f"not run: {sid} needs root"), why
    assert unmet_needs(SCENARIOS["oversubscribed-threads"], euid=1000, status="CapEff:\t0\n") is None


@pytest.mark.parametrize("variant", ["broken", "fixed"])
@pytest.mark.parametrize("sid", LESSONS)
def test_every_variant_does_what_it_expects_running_the_file_shown(outcomes, sid, variant):
    o = outcomes[sid, variant]
    assert o.matched, (o.problems, o.figures, o.diagnosis_text)
    want = hashlib.sha256(SCENARIOS[sid].script_path(variant).read_bytes()).hexdigest()
    assert ran_hashes(o.run_dir) == {r: want for r in range(NPROC)}


def test_the_rank_under_the_cpu_quota_is_named_as_the_straggler(outcomes):
    o = outcomes["straggler", "broken"]
    d, f = o.diagnosis, o.figures
    assert (d["kind"], d["culprit_ranks"], d["advisory"]) == ("straggler", [NPROC - 1], True)
    assert d["headline"].startswith(f"rank {NPROC - 1} computes ") and "the job loses" in d["headline"], d["headline"]
    assert f["broken_slow_rank"] == NPROC - 1 and f["broken_outside_ratio"] >= 2, f  # its forward and optimizer, slowed by the quota
    assert f["broken_shares"] == {"0": 512, "1": 512}, f  # figures come back from JSON: rank keys are strings


def test_re_splitting_balances_the_ranks_and_steps_get_faster(outcomes):
    fixed, broken = outcomes["straggler", "fixed"], outcomes["straggler", "broken"]
    assert fixed.diagnosis is None, fixed.diagnosis_text
    f = fixed.figures
    assert sum(f["fixed_shares"].values()) == 1024 and f["fixed_shares"]["1"] < f["fixed_shares"]["0"], f
    assert broken.figures["broken_step_ms"] / f["fixed_step_ms"] >= 1.2, (broken.figures, f)


def test_workers_take_the_data_wait_off_the_step(outcomes):
    b, f = outcomes["dataloader-bottleneck", "broken"].figures, outcomes["dataloader-bottleneck", "fixed"].figures
    from distlab.scenarios.performance import MIN_BROKEN_DATA_SHARE, MAX_FIXED_DATA_SHARE
    assert min(b["broken_data_share"].values()) >= MIN_BROKEN_DATA_SHARE, (b, f)  # the training process waits for its reads
    assert max(f["fixed_data_share"].values()) <= MAX_FIXED_DATA_SHARE, (b, f)  # workers read ahead: most of that wait is gone
    mean = lambda d: sum(d.values()) / len(d)  # each rank is held to the thresholds above; the drop is the ranks' mean:
    # one rank's best broken share against another's worst fixed one is two noisy extremes (0.095 vs 0.058 seen, 2026-11-26)
    assert mean(f["fixed_data_share"]) < 0.6 * mean(b["broken_data_share"]), (b, f)
    # not asserted: a faster step. On 2 cores the workers' reads take the ranks' own cores (clean-clone CI: 54.8 -> 44.8
    # ms in one run, 44.0 -> 44.2 ms in the next), so what moves for sure is the wait, not the step


def test_threads_per_rank_fit_the_cores(outcomes):
    b, f = outcomes["oversubscribed-threads", "broken"].figures, outcomes["oversubscribed-threads", "fixed"].figures
    assert sum(b["broken_threads_per_rank"].values()) > b["cores"], b
    assert set(f["fixed_threads_per_rank"].values()) == {max(1, f["cores"] // NPROC)}, f


def test_oversubscribed_threads_are_named_by_their_cause_not_as_a_straggler(outcomes):
    o = outcomes["oversubscribed-threads", "broken"]
    d, f = o.diagnosis, o.figures
    assert (d["kind"], d["advisory"]) == ("oversubscribed-threads", True), o.diagnosis_text
    threads, cores = f["broken_threads_per_rank"]["0"], f["cores"]
    assert f"run {threads} intra-op threads each: {threads * NPROC} threads on {cores} cores" in d["headline"], d["headline"]
    assert f"torch.set_num_threads({max(1, cores // NPROC)})" in d["fix"], d["fix"]


def test_no_other_performance_run_is_diagnosed(outcomes):
    named = {("straggler", "broken"): "straggler", ("oversubscribed-threads", "broken"): "oversubscribed-threads"}
    kinds = {k: (o.diagnosis or {}).get("kind") for k, o in outcomes.items()}
    assert kinds == {k: named.get(k) for k in outcomes}, kinds


def test_the_limits_leave_nothing_behind(outcomes):
    assert limits_gone_within() == NOTHING


@pytest.mark.parametrize("sid,name,passes,says", TRIES)
def test_a_learners_try_is_graded_by_its_outcome(tmp_path, sid, name, passes, says):
    v = try_fix(sid, FIXES / sid / name, nproc=NPROC, backend="gloo", runs_root=tmp_path)
    assert v.passed is passes, v.text()
    assert says in " ".join(v.reasons), v.text()
    assert limits_gone_within() == NOTHING
