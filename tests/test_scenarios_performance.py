"""The performance family on real torchrun ranks at world 2 (the walkthrough's runs, read again here): each broken variant is slow in the way its scenario
says (the straggler named, data wait dominating, threads outnumbering cores), each fixed variant is measurably
faster or less starved, and no fixed run is diagnosed at all."""
from pathlib import Path
import pytest
from distlab.scenarios import SCENARIOS
from helpers import gone_within

NPROC = 2
PERFORMANCE = sorted(s.id for s in SCENARIOS.values() if s.family == "performance" and (s.rank_fn or "").startswith("distlab.scenarios.performance:"))


pytestmark = pytest.mark.timeout(900)  # the first test here may be the one that runs the walkthrough


@pytest.fixture(scope="module")
def outcomes(walkthroughs):
    "Every scenario of this module, broken and fixed, at world 2: the runs of examples/02_performance.ipynb (one per variant)."
    out = {k: o for k, o in walkthroughs.by_variant("02_performance").items() if k[0] in PERFORMANCE}
    assert set(out) == {(sid, v) for sid in PERFORMANCE for v in ("broken", "fixed")}, sorted(out)
    for o in out.values(): gone_within(Path(o.run_dir).name)
    return out


def test_the_family_is_registered():
    assert PERFORMANCE == ["dataloader-bottleneck", "oversubscribed-threads", "straggler"]


@pytest.mark.parametrize("variant", ["broken", "fixed"])
@pytest.mark.parametrize("sid", ["dataloader-bottleneck", "oversubscribed-threads", "straggler"])
def test_every_variant_does_what_it_expects(outcomes, sid, variant):
    o = outcomes[sid, variant]
    assert o.matched, (o.problems, o.figures, o.diagnosis_text)
    assert o.status == "ok" and set(o.steps_per_rank.values()) == {40 if sid == "straggler" else o.steps_per_rank[0]}


def test_the_straggler_is_named_with_its_figures(outcomes):
    o = outcomes["straggler", "broken"]
    d = o.diagnosis
    assert (d["kind"], d["culprit_ranks"], d["advisory"]) == ("straggler", [NPROC - 1], True)
    assert d["headline"].startswith(f"rank {NPROC - 1} computes ") and "the job loses" in d["headline"], d["headline"]
    f = o.figures
    assert f["broken_slow_rank"] == NPROC - 1
    assert f["broken_slow_compute_ms"] > 2 * f["broken_others_compute_ms"], f  # ~3x slower per sample, emulated
    assert f["broken_others_wait_ms"] > 0.5 * (f["broken_slow_compute_ms"] - f["broken_others_compute_ms"]), f


def test_rebalancing_makes_steps_faster_and_is_not_a_straggler(outcomes):
    fixed, broken = outcomes["straggler", "fixed"], outcomes["straggler", "broken"]
    assert fixed.diagnosis is None, fixed.diagnosis_text
    f = fixed.figures
    assert f["fixed_shares"][-1] == min(f["fixed_shares"]) and sum(f["fixed_shares"]) == 256, f
    assert f["fixed_speedup"] >= 1.2, f  # the same run, equal shares against re-split
    assert broken.figures["broken_step_ms"] / f["fixed_step_ms"] >= 1.2, (broken.figures, f)  # and against the broken run


def test_workers_take_the_data_wait_off_the_step(outcomes):
    b, f = outcomes["dataloader-bottleneck", "broken"].figures, outcomes["dataloader-bottleneck", "fixed"].figures
    assert b["broken_data_share"] >= 0.4 and f["fixed_data_share"] <= 0.2, (b, f)
    assert b["broken_data_share"] / max(f["fixed_data_share"], 1e-3) >= 2, (b, f)
    assert f["fixed_step_ms"] < b["broken_step_ms"], (b, f)


def test_threads_per_rank_fit_the_cores_and_steps_get_faster(outcomes):
    b, f = outcomes["oversubscribed-threads", "broken"].figures, outcomes["oversubscribed-threads", "fixed"].figures
    assert b["broken_threads_per_rank"] * NPROC > b["cores"], b
    assert f["fixed_threads_per_rank"] == max(1, f["cores"] // NPROC), f
    assert b["broken_step_ms"] / f["fixed_step_ms"] >= 1.3, (b, f)  # measured 1.9x at world 2 (compute alone ~1.1x; ~6x at world 4)


def test_oversubscribed_threads_are_named_by_their_cause_not_as_a_straggler(outcomes):
    o = outcomes["oversubscribed-threads", "broken"]
    d, f = o.diagnosis, o.figures
    assert (d["kind"], d["culprit_ranks"], d["advisory"]) == ("oversubscribed-threads", list(range(NPROC)), True), o.diagnosis_text
    threads, cores = f["broken_threads_per_rank"], f["cores"]
    assert f"run {threads} intra-op threads each: {threads * NPROC} threads on {cores} cores" in d["headline"], d["headline"]
    assert f"torch.set_num_threads({max(1, cores // NPROC)})" in d["fix"], d["fix"]


def test_no_other_performance_run_is_diagnosed(outcomes):
    named = {("straggler", "broken"): "straggler", ("oversubscribed-threads", "broken"): "oversubscribed-threads"}
    kinds = {k: (o.diagnosis or {}).get("kind") for k, o in outcomes.items()}
    assert kinds == {k: named.get(k) for k in outcomes}, kinds
