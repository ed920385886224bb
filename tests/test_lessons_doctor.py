"""The doctor family's lessons (distlab.scenarios.doctor) on real ranks at world 2, gloo: a learner's own fix of each
script is graded by the scenario's checks, and a non-fix is refused with the reason. What the script does not choose
is the machine's and stays so for every try: the ranks' private 14 MiB /dev/shm (shm-too-small, root only), and two
torchrun agents as two nodes, node 1's launch exporting TORCH_DISTRIBUTED_DEBUG=DETAIL (node-mismatch). The broken
and fixed scripts' own runs are walkthrough 06's."""
import hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import pytest
from distlab.scenarios import SCENARIOS
from distlab.scenarios.lesson import marked_lines, ran_hashes, script_source, show, try_fix
from distlab.scenarios.runner import not_run_reason
from helpers import gone_within

FIXES = Path(__file__).parent / "fixes"
DOCTOR = ("bad-nccl-env", "shm-too-small", "node-mismatch")
NO_ROOT = not_run_reason(SCENARIOS["shm-too-small"], 2)
_root = pytest.mark.skipif(NO_ROOT is not None, reason=str(NO_ROOT))
# (scenario, a learner's script under tests/fixes/<scenario>/, passes?, what the verdict must say)
TRIES = [
    ("bad-nccl-env", "interface_lo.py", True, ""),  # an interface this machine has: loopback, the job being on one node
    ("bad-nccl-env", "longer_timeout.py", False, "eth9"),  # a 30-minute init timeout: gloo still finds no eth9, at once
    pytest.param("shm-too-small", "one_worker.py", True, "", marks=_root),  # one worker, prefetch_factor=1: at most three 4 MiB batches in 14 MiB
    pytest.param("shm-too-small", "catch_and_go_on.py", False, "/dev/shm", marks=_root),  # try/except around the loop: the worker still ran out
    ("node-mismatch", "detail_everywhere.py", True, ""),  # DETAIL on every node, read again before init: the nodes agree
    ("node-mismatch", "longer_timeout.py", False, "TORCH_DISTRIBUTED_DEBUG"),  # a longer init timeout: the nodes still differ
    ("node-mismatch", "environ_only.py", False, "torch_debug_level"),  # os.environ.pop after `import torch`: torch's level stays DETAIL
]
CASES = [t.values if hasattr(t, "values") else t for t in TRIES]


def test_every_doctor_scenario_is_a_lesson_that_says_what_the_machine_adds():
    for sid in DOCTOR:
        s = SCENARIOS[sid]
        assert s.rank_fn is None and all(v.script for v in s.variants.values()), sid
        assert len(s.hints) == 3 and marked_lines(script_source(sid)), sid
    assert "/dev/shm is a private 14 MiB tmpfs" in show("shm-too-small") and "needs root" in show("shm-too-small")
    assert "node 1's launch exporting TORCH_DISTRIBUTED_DEBUG=DETAIL" in show("node-mismatch", "fixed")
    assert "TORCH_DISTRIBUTED_DEBUG" not in script_source("node-mismatch").split('"""')[2].split("# BUG")[0]  # the script sets nothing: the node does


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    "Every try that can run here, graded on 2 real ranks, two tries at a time."
    root = tmp_path_factory.mktemp("doctor-tries")
    runnable = [c for c in CASES if c[0] != "shm-too-small" or NO_ROOT is None]
    def one(case):
        sid, name, _, _ = case
        return try_fix(sid, FIXES / sid / name, nproc=2, backend="gloo", runs_root=root)
    with ThreadPoolExecutor(2) as pool:
        return dict(zip([c[:2] for c in runnable], pool.map(one, runnable)))


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("sid,name,passes,says", TRIES, ids=[f"{c[0]}/{c[1]}" for c in CASES])
def test_the_grader_takes_a_fix_and_refuses_a_non_fix(verdicts, sid, name, passes, says):
    v = verdicts[sid, name]
    assert v.passed is passes, v.text()
    assert says in " ".join(v.reasons), v.text()
    if not passes and v.outcome.status != "ok": assert v.outcome.diagnosis is not None, v.text()  # the watcher's word, not only a figure
    want = hashlib.sha256((FIXES / sid / name).read_bytes()).hexdigest()
    assert ran_hashes(v.outcome.run_dir) == {0: want, 1: want}, (sid, name)  # node-mismatch: the two nodes' ranks ran it
    gone_within(Path(v.outcome.run_dir).name, 5)
