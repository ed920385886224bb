"""The worker-oom-kill lesson (distlab.scenarios.worker_oom) on real ranks at world 2, gloo: rank 1 and its DataLoader
workers under a real cgroup v1 memory limit (distlab.run.limits). Broken: four workers, each with its own copy of the
dataset's index, pass the limit; the kernel's OOM killer ends a worker (its line in the kernel's log names the
pt_data_worker it chose), the rank fails with PyTorch's `DataLoader worker (pid N) is killed by signal: Killed`, and
distlab's diagnosis says OOM-killed with the kernel's line. Fixed: two workers run within the limit, with the peak
against the limit in the figures. The broken and fixed runs are walkthrough 03's (made once per session); three
learner tries (two fixes, one non-fix) run side by side. Without root or the memory controller: skipped, with why."""
import hashlib, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import pytest
from distlab.run.limits import Limits, leftovers, missing_privileges
from distlab.scenarios import SCENARIOS
from distlab.scenarios.lesson import ran_hashes, try_fix
from distlab.scenarios.worker_oom import LIMIT_MIB, kernel_kills
from helpers import gone_within

SID = "worker-oom-kill"
FIXES = Path(__file__).parent / "fixes" / SID
NPROC = 2
# (a learner's script under tests/fixes/worker-oom-kill/, passes?, what the verdict must say)
TRIES = [
    ("shared_index.py", True, ""),  # the index read once in the rank, before the workers fork: they share its pages
    ("no_workers.py", True, ""),  # guide 003's fallback, num_workers=0: one index, one batch at a time
    ("prefetch_one.py", False, "OOM killer ended"),  # guide 003's prefetch_factor=1: the workers' own copies still pass the limit
]
WHY_NOT = missing_privileges(Limits(mem_mib=LIMIT_MIB))
pytestmark = [pytest.mark.timeout(900), pytest.mark.skipif(WHY_NOT is not None, reason=f"not run: {WHY_NOT}")]


@pytest.fixture(scope="module")
def runs(walkthroughs, tmp_path_factory):
    "The lesson's broken and fixed runs (walkthrough 03's) and the three tries on 2 real gloo ranks, side by side."
    root = tmp_path_factory.mktemp("worker-oom")
    with ThreadPoolExecutor(len(TRIES)) as pool:
        tries = pool.map(lambda t: try_fix(SID, FIXES / t[0], nproc=NPROC, backend="gloo", runs_root=root), TRIES)
        out = {("try", name): v for (name, _, _), v in zip(TRIES, tries)}
    got = walkthroughs.by_variant("03_memory")
    for variant in SCENARIOS[SID].variants: out["run", variant] = got[SID, variant]
    for o in out.values(): gone_within(Path((o.outcome if hasattr(o, "outcome") else o).run_dir).name, 5)
    return out


def _ran_the_script_shown(o, variant: str):
    want = hashlib.sha256(SCENARIOS[SID].script_path(variant).read_bytes()).hexdigest()
    assert ran_hashes(o.run_dir) == {r: want for r in range(NPROC)}, (variant, ran_hashes(o.run_dir))


@pytest.mark.slow
def test_broken_the_kernel_kills_a_worker_and_the_rank_and_distlab_say_so(runs):
    o = runs["run", "broken"]
    assert o.matched and o.status == "failed", f"{o.problems}\n{o.diagnosis_text}"
    _ran_the_script_shown(o, "broken")
    f = o.figures
    assert f["broken_rank"] == 1 and f["broken_workers"] == 4 and f["broken_oom_kills"] >= 1, f
    assert f["broken_peak_mib"] >= LIMIT_MIB - 1, f  # the cgroup reached its limit, and no further
    pid = f["broken_log_killed_pids"][0]
    assert f"DataLoader worker (pid {pid}) is killed by signal: Killed" in (Path(o.run_dir) / "logs" / "rank1.stderr").read_text()
    if f["broken_kernel_lines"]:  # the kernel's log was readable: its line names the same worker, and distlab's diagnosis quotes it
        assert (f["broken_victim_pid"], f["broken_victim_name"]) == (pid, "pt_data_worker"), f
        assert f["broken_victim_anon_rss_mib"] > f["broken_rank_rss_peak_mib"], f  # why the kernel chose it: more resident memory than the rank
        assert f["broken_worker_oom_score"] > f["broken_rank_oom_score"], f  # the kernel's own badness ranks the workers above the rank
        d = o.diagnosis
        assert "OOM-killed by the kernel" in d["headline"] and f"Killed process {pid} (pt_data_worker)" in d["explanation"], d


@pytest.mark.slow
def test_fixed_two_workers_run_within_the_limit(runs):
    o, broken = runs["run", "fixed"], runs["run", "broken"].figures
    assert o.matched and o.status == "ok" and o.diagnosis is None, f"{o.problems}\n{o.diagnosis_text}"
    _ran_the_script_shown(o, "fixed")
    f = o.figures
    assert f["fixed_oom_kills"] == 0 and f["fixed_workers"] == 2, f
    assert f["fixed_peak_mib"] < 0.9 * LIMIT_MIB, f  # a margin under the limit, not a near miss
    assert f["fixed_worker_rss_peak_mib"] > 0 and f["fixed_rank_rss_peak_mib"] > 0, f


@pytest.mark.slow
@pytest.mark.parametrize("name,passes,says", TRIES, ids=[t[0] for t in TRIES])
def test_the_grader_takes_two_fixes_and_refuses_a_non_fix(runs, name, passes, says):
    v = runs["try", name]
    assert v.passed is passes, v.text()
    assert says in " ".join(v.reasons), v.text()
    assert set(ran_hashes(v.outcome.run_dir).values()) == {hashlib.sha256((FIXES / name).read_bytes()).hexdigest()}
    f = v.outcome.figures
    assert (f["fixed_oom_kills"] == 0) is passes and ((f["fixed_peak_mib"] < LIMIT_MIB) is passes), f


@pytest.mark.slow
def test_no_memory_cgroup_is_left(runs):
    end = time.monotonic() + 10  # each run's limits go as its launcher's on_exit releases them
    while (left := [c for c in leftovers()["cgroups"] if "/memory/" in c]) and time.monotonic() < end: time.sleep(0.2)
    assert left == [], left
