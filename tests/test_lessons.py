"""Lessons on real ranks: the script a learner reads is the one the ranks ran, and the grader accepts any correct
fix of it and refuses a non-fix with the watcher's reason. The scripts' own broken and fixed runs are walkthrough
01's (one papermill run per session); the tries here are learners' versions under tests/fixes/<scenario>/."""
import hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import pytest
from distlab.scenarios import SCENARIOS
from distlab.scenarios.lesson import lesson_ids, ran_hashes, script_source, show, try_fix
from helpers import gone_within

FIXES = Path(__file__).parent / "fixes"
HANGS_LESSONS = [s for s in lesson_ids() if SCENARIOS[s].family == "hangs" and not SCENARIOS[s].needs_gpu]  # GPU-only: tests/test_lessons_wrong_device.py
# (scenario, a learner's script, passes?, what the verdict must say)
TRIES = [
    ("uneven-batches", "join.py", True, ""),                 # Join([model]): the short rank shadows the others' all-reduces
    ("uneven-batches", "min_count.py", True, ""),            # all_reduce(MIN) of the batch counts before the loop
    ("uneven-batches", "longer_timeout.py", False, "still hangs"),  # a 2-hour timeout: the same hang, longer
    ("rank-conditional-collective", "rank0_local.py", True, ""),    # rank 0 evaluates alone, with no collective
    ("rank-conditional-collective", "try_except.py", False, "still hangs"),  # try/except around the all_reduce
    ("collective-mismatch", "gather_object.py", True, ""),   # all_gather_object: any shape
    ("stalled-rank", "rlock.py", True, ""),                  # a reentrant lock: the holder may take it again
    ("worker-fork-deadlock", "pid_check.py", True, ""),      # fork kept; each process makes its own reader pool
    ("worker-fork-deadlock", "loader_timeout.py", False, "DataLoader timed out"),  # the wait becomes an error, the run still fails
    ("init-port-taken", "setdefault.py", True, ""),         # os.environ.setdefault: torchrun's address and port kept
    ("init-port-taken", "retry.py", False, "address already in use"),  # retrying the bind: the stale job still holds the port
]


def test_every_hangs_lesson_is_listed():
    assert {"uneven-batches", "rank-conditional-collective", "collective-mismatch", "stalled-rank", "init-hang", "init-port-taken",
            "dataloader-worker-crash", "worker-fork-deadlock", "worker-stuck-read"} <= set(HANGS_LESSONS), HANGS_LESSONS


@pytest.mark.slow
@pytest.mark.papermill
@pytest.mark.timeout(900)  # it may be the test that runs walkthrough 01 (about 5 minutes on 2 busy cores)
def test_the_code_shown_is_the_code_that_ran(walkthroughs):
    "Every rank of every lesson run of walkthrough 01 ran exactly the bytes `show` prints (SHA-256 in its hello event)."
    runs = walkthroughs.by_variant("01_hangs_and_mismatches")
    for sid in HANGS_LESSONS:
        for variant in ("broken", "fixed"):
            text = script_source(sid, variant)
            assert show(sid, variant, diff=False, numbers=False).endswith(text)
            o = runs[sid, variant]
            want = hashlib.sha256(text.encode()).hexdigest()
            assert ran_hashes(o.run_dir) == {r: want for r in range(o.nproc)}, (sid, variant, o.run_dir)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    "Every try in TRIES graded on 2 real ranks, two tries at a time."
    root = tmp_path_factory.mktemp("tries")
    def one(case):
        sid, name, _, _ = case
        return try_fix(sid, FIXES / sid / name, nproc=2, backend="gloo", runs_root=root)
    with ThreadPoolExecutor(2) as pool:
        return dict(zip([c[:2] for c in TRIES], pool.map(one, TRIES)))


@pytest.mark.slow
@pytest.mark.parametrize("sid,name,passes,says", TRIES, ids=[f"{c[0]}/{c[1]}" for c in TRIES])
def test_the_grader_takes_any_fix_and_refuses_a_non_fix(verdicts, sid, name, passes, says):
    v = verdicts[sid, name]
    assert v.passed is passes, v.text()
    assert says in " ".join(v.reasons), v.text()
    if not passes: assert v.outcome.diagnosis is not None and "rank" in v.reasons[0], v.text()  # the watcher's who and where
    assert set(ran_hashes(v.outcome.run_dir).values()) == {hashlib.sha256((FIXES / sid / name).read_bytes()).hexdigest()}
    gone_within(Path(v.outcome.run_dir).name, 5)
