"""The worker-memory-growth lesson (distlab.scenarios.worker_memory) on real ranks at world 2: DataLoader workers
forked from ranks that hold their corpus as Python lists get private copies of it as they read it (copy-on-read):
their private memory (USS) and PSS climb while their RSS, what `top` shows, stays flat; with the corpus in tensors
the workers stay flat. The figures are the health samples distlab takes of every rank's children, for any script.
The broken and fixed runs are walkthrough 03's (made once per session); two learner tries run side by side."""
from pathlib import Path
import pytest
from distlab.scenarios import SCENARIOS
from distlab.scenarios.worker_memory import MAX_FLAT_GROWTH_MIB, MIN_GROWTH_MIB, worker_figures, worker_series
from helpers import all_gone, assert_ran, assert_verdict, run_tries

SID = "worker-memory-growth"
FIXES = Path(__file__).parent / "fixes" / SID
NPROC = 2
# (a learner's script under tests/fixes/worker-memory-growth/, passes?, what the verdict must say)
TRIES = [
    ("numpy_arrays.py", True, ""),  # the corpus as int32 numpy arrays: no per-token objects
    ("prefetch_one.py", False, "private memory grew by"),  # guide 003's prefetch_factor=1: the workers still copy what they read
]

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def runs(walkthroughs, tmp_path_factory):
    "The lesson's broken and fixed runs (walkthrough 03's, made once per session) and the tries on 2 real gloo ranks, two at a time."
    root = tmp_path_factory.mktemp("worker-memory")
    tries = run_tries([(SID, name) for name, _, _ in TRIES], root, FIXES.parent, NPROC)
    out = {("try", name): v for (name, _, _), v in zip(TRIES, tries)}
    got = walkthroughs.by_variant("03_memory")
    for variant in SCENARIOS[SID].variants: out["run", variant] = got[SID, variant]
    all_gone(out)
    return out


def _ran_the_script_shown(o, variant: str): assert_ran(o.run_dir, SCENARIOS[SID].script_path(variant), NPROC)


@pytest.mark.slow
def test_broken_workers_copy_what_they_read_while_rss_stays_flat(runs):
    o = runs["run", "broken"]
    assert o.matched and o.status == "ok" and o.diagnosis is None, f"{o.problems}\n{o.diagnosis_text}"
    _ran_the_script_shown(o, "broken")
    figs = worker_figures(o.run_dir)
    assert set(figs) == set(range(NPROC)), figs  # every rank's workers were sampled
    for r, f in figs.items():
        uss = f["worker_uss_growth_mib"]
        assert f["workers"] == 2 and f["samples"] >= 4 and uss >= MIN_GROWTH_MIB, (r, f)
        assert abs(f["worker_rss_peak_mib"] - f["worker_rss_start_mib"]) < uss / 4, (r, f)  # top's figure hides the copies
        assert f["worker_rss_start_mib"] > f["worker_uss_peak_mib"], (r, f)  # RSS is as large as the rank's from the start
        assert f["worker_pss_peak_mib"] - f["worker_pss_start_mib"] > uss / 4, (r, f)  # each copied page moves into the worker's share
        assert f["workers_uss_peak_mib"] - f["workers_uss_start_mib"] > 1.5 * MIN_GROWTH_MIB, (r, f)  # the node pays for both workers' copies
        s = [x for x in worker_series(o.run_dir, r) if x["workers"] == 2]
        assert s[-1]["worker_uss_mib"] > s[len(s) // 2]["worker_uss_mib"] > s[0]["worker_uss_mib"], (r, s)  # still climbing late in the run


@pytest.mark.slow
def test_fixed_workers_stay_flat_running_the_script_shown(runs):
    o = runs["run", "fixed"]
    assert o.matched and o.diagnosis is None, f"{o.problems}\n{o.diagnosis_text}"
    _ran_the_script_shown(o, "fixed")
    figs, broken = worker_figures(o.run_dir), worker_figures(runs["run", "broken"].run_dir)
    assert set(figs) == set(range(NPROC)), figs
    for r, f in figs.items():
        assert f["workers"] == 2 and f["worker_uss_growth_mib"] <= MAX_FLAT_GROWTH_MIB, (r, f)
        assert f["worker_uss_peak_mib"] < broken[r]["worker_uss_peak_mib"] / 3, (r, f, broken[r])


@pytest.mark.slow
@pytest.mark.parametrize("name,passes,says", TRIES, ids=[t[0] for t in TRIES])
def test_the_grader_takes_another_fix_and_refuses_a_non_fix(runs, name, passes, says):
    assert_verdict(runs["try", name], passes, says, FIXES / name)


@pytest.mark.slow
def test_the_tour_saves_the_workers_memory_figure(runs, tmp_path):
    from distlab.cli import _save_plots  # what `distlab tour` does with each run
    from distlab.ui.plots import run_scenario_id
    o = runs["run", "broken"]
    assert run_scenario_id(o.run_dir) == SID
    paths = _save_plots(o.run_dir, tmp_path / f"{SID}-broken")
    png = next((p for p in paths if p.name.endswith("-worker-memory.png")), None)
    assert png is not None, [p.name for p in paths]
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 20_000, (png, png.stat().st_size)
    assert {"progress", "timeline"} <= {p.stem.rsplit("-", 1)[-1] for p in paths}, [p.name for p in paths]
