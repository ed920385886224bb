"""The memory lessons (distlab.scenarios.memory) on real ranks at world 2: each broken script dies of the real
allocator error under the limit its launch sets, and its memory record shows the allocation that failed over the
budget; each fix trains every step under the budget, running exactly the script shown; and the grader takes other
fixes and refuses non-fixes with the reason. The broken and fixed runs are walkthrough 03's (made once per session);
the 6 learner tries under tests/fixes/<id>/ go two at a time."""
from pathlib import Path
import pytest
from distlab.scenarios import SCENARIOS
from distlab.scenarios.memory import memory_events, rank_peaks
from helpers import assert_ran, assert_verdict, lesson_runs, script_lines

FIXES = Path(__file__).parent / "fixes"
NPROC = 2
MEMORY = ("oom", "uneven-memory", "memory-leak", "attention-memory")
# (scenario, a learner's script, passes?, what the verdict must say)
TRIES = [
    ("oom", "eight_micro_batches.py", True, ""),  # accumulation over 8 strided micro-batches, no_sync written out
    ("memory-leak", "detach.py", True, ""),  # the score kept as a detached tensor: no graph, no growth
    ("oom", "skip_the_step.py", False, "at least 2 steps"),  # catch the error and go on: no rank ever trains
    ("oom", "raise_the_limit.py", False, "budget"),  # lift RLIMIT_DATA from inside the script: it runs, over the budget
    ("attention-memory", "chunked_rows.py", True, ""),  # by hand, 256 query rows at a time, each chunk recomputed in backward
    ("attention-memory", "math_backend.py", False, "can't allocate memory"),  # scaled_dot_product_attention on its math backend
]

pytestmark = pytest.mark.timeout(900)


def test_the_tries_cover_two_fixes_and_a_non_fix():
    assert all((FIXES / s / n).is_file() for s, n, _, _ in TRIES)
    assert sum(p for _, _, p, _ in TRIES) >= 2 and not all(p for _, _, p, _ in TRIES)
    assert {p for s, _, p, _ in TRIES if s == "oom"} == {True, False}


@pytest.fixture(scope="module")
def runs(walkthroughs, tmp_path_factory):
    "Every variant of the memory family (walkthrough 03's runs, made once per session) and every try on 2 real gloo ranks, two at a time."
    root = tmp_path_factory.mktemp("memory")
    return lesson_runs(walkthroughs, ["03_memory"], MEMORY, TRIES, root, FIXES, NPROC)


@pytest.mark.slow
@pytest.mark.parametrize("sid", ["oom", "uneven-memory", "attention-memory"])
def test_broken_dies_of_the_real_limit_and_the_figure_shows_the_failed_allocation(runs, sid):
    o = runs["run", sid, "broken"]
    assert o.matched, f"{o.problems}\n{o.diagnosis_text}"
    tb = o.failure["traceback"]
    assert "DefaultCPUAllocator: can't allocate memory" in tb, tb
    where = ("scores = ", "weights = ") if sid == "attention-memory" else ("loss = ", "loss.backward()", "opt.step()")
    assert any(s in tb for s in script_lines(sid, *where)), tb  # the script's own line
    dead = o.failure["rank"]
    if sid == "uneven-memory": assert dead == 1 and o.diagnosis["culprit_ranks"] == [1], o.diagnosis_text  # the small card
    (e,) = memory_events(o.run_dir, dead, failed=True)
    held, asked, room = e["data_growth_bytes"], e["requested_bytes"], e["budget_bytes"] - e["baseline_bytes"]
    assert held <= room < held + asked, (held, asked, room)  # it held no more than its budget, and the allocation would have passed it
    f = o.figures
    prefix = {"oom": "broken_", "uneven-memory": "uneven_broken_", "attention-memory": "attention_broken_"}[sid]
    assert f[prefix + "failed_rank"] == dead and f[prefix + "failed_asked_mib"] == round(asked / 2**20, 1), f


@pytest.mark.slow
@pytest.mark.parametrize("sid,variant", [(s, v) for s in MEMORY for v, var in SCENARIOS[s].variants.items()
                                         if v != "broken" and not var.needs_gpu])  # the GPU ones: tests/test_memory_gpu.py
def test_each_fix_trains_every_step_under_the_budget_running_the_script_shown(runs, sid, variant):
    o = runs["run", sid, variant]
    assert o.matched and o.diagnosis is None, f"{o.problems}\nfailure: {o.failure}\n{o.diagnosis_text or ''}"
    assert_ran(o.run_dir, SCENARIOS[sid].script_path(variant))
    peaks = rank_peaks(o.run_dir)
    assert set(peaks) == set(range(NPROC)), peaks
    for r, e in peaks.items():
        if e.get("budget_bytes") is not None: assert e["peak_bytes"] <= e["budget_bytes"], (r, e)  # measured, per rank


@pytest.mark.slow
def test_the_leak_grows_and_the_fix_is_flat(runs):
    grows = runs["run", "memory-leak", "broken"].figures["leak_broken_mib_per_step"]
    flat = runs["run", "memory-leak", "fixed"].figures["leak_fixed_mib_per_step"]
    assert grows >= 2.0 and abs(flat) <= 0.5, (grows, flat)


@pytest.mark.slow
def test_the_score_matrix_is_what_does_not_fit(runs):
    "The allocation that failed is one layer's score matrix (4 heads x 2048 x 2048 float32), and the fused kernel's step is both smaller and no slower."
    b, f = runs["run", "attention-memory", "broken"].figures, runs["run", "attention-memory", "fixed"].figures
    assert b["attention_broken_failed_asked_mib"] == b["attention_scores_mib"] == 64.0, b
    assert f["attention_peak_mib"] - f["attention_baseline_mib"] < f["attention_budget_mib"] - f["attention_baseline_mib"] - 16, f  # 16 MiB to spare


@pytest.mark.slow
@pytest.mark.parametrize("sid,name,passes,says", TRIES, ids=[f"{c[0]}/{c[1]}" for c in TRIES])
def test_the_grader_takes_another_fix_and_refuses_a_non_fix(runs, sid, name, passes, says):
    v = runs["try", sid, name]
    assert_verdict(v, passes, says, FIXES / sid / name)
