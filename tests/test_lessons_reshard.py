"""The fsdp-reshard lesson (distlab.scenarios.checkpoint_reshard) on real ranks at world 2: FSDP2 state saved by 2
gloo ranks and loaded again at 2 (the job resuming) and at 1 (rank 0 alone, no process group, a plain model: an
evaluation job). Broken: each rank's `torch.save(model.state_dict())` resumes at 2 and fails at 1 with the real
error, at the script's own line; fixed (a full state dict gathered to rank 0) and fixed-sharded (DCP) give the
trained loss on the fixed batch at both world sizes, from the script shown. The grader takes another fix
(`DTensor.full_tensor()`) and refuses guide 001's `FSDP.summon_full_params`. The three variants' runs are
walkthrough 05's (made once per session, shared with test_lessons_checkpoints); the 2 tries go two at a time."""
from pathlib import Path
import pytest
from distlab.scenarios import SCENARIOS
from helpers import all_gone, assert_ran, assert_verdict, run_tries, traceback_line

SID = "fsdp-reshard"
FIXES = Path(__file__).parent / "fixes" / SID
NPROC = 2
# (a learner's script, passes?, what the verdict must say)
TRIES = [
    ("full_tensor.py", True, ""),  # every rank gathers each DTensor with full_tensor(), rank 0 saves, every rank reads the file
    ("summon_full_params.py", False, "the resume at world 2 gave losses"),  # guide 001: FSDP1's summon_full_params around the save (a no-op on FSDP2: rank 0 saves its shards; rank 1 resumes with rank 0's rows)
]

pytestmark = pytest.mark.timeout(900)


def line_of(snippet: str, variant: str = "broken") -> str:
    "How a traceback names the one line of the script whose statement starts with `snippet`: `broken.py\", line N`."
    return traceback_line(SID, snippet, variant)


@pytest.fixture(scope="module")
def runs(walkthroughs, tmp_path_factory):
    "The three variants (walkthrough 05's runs) and the two tries on 2 real gloo ranks, two at a time."
    root = tmp_path_factory.mktemp("reshard")
    out = dict(zip([n for n, _, _ in TRIES], run_tries([(SID, n) for n, _, _ in TRIES], root, FIXES.parent, NPROC)))
    out |= {v: o for (sid, v), o in walkthroughs.by_variant("05_checkpoints").items() if sid == SID}
    assert set(SCENARIOS[SID].variants) <= set(out), sorted(out)
    all_gone(out)
    return out


@pytest.mark.slow
def test_broken_resumes_at_2_and_fails_at_1(runs):
    o = runs["broken"]
    assert o.matched, f"{o.problems}\n{o.diagnosis_text}"
    assert o.diagnosis["culprit_ranks"] == [0], o.diagnosis
    tb = (o.failure or {}).get("traceback") or ""
    assert line_of("plain.load_state_dict(") in tb and "in evaluate" in tb, tb[-800:]
    assert "got mixed torch.Tensor and DTensor" in tb, tb[-800:]
    f = o.figures
    assert (f["param_type"], f["rows_per_rank"], f["rows"]) == ("DTensor", [32, 32], 64), f  # each rank's file: half the rows
    assert sorted(f["checkpoint_files"]) == ["model-rank0.pt", "model-rank1.pt"], f
    assert f["loss_resumed_at_world_2"] == [f["trained_loss"]] * NPROC and f["loss_at_world_1"] is None, f


@pytest.mark.slow
@pytest.mark.parametrize("variant,files", [("fixed", ["model.pt"]), ("fixed-sharded", [".metadata", "__0_0.distcp", "__1_0.distcp"])])
def test_fixed_loads_at_2_and_at_1(runs, variant, files):
    o = runs[variant]
    assert o.matched and o.diagnosis is None, f"{o.problems}\nfailure: {o.failure}\n{o.diagnosis_text or ''}"
    f = o.figures
    assert f["loss_resumed_at_world_2"] == [f["trained_loss"]] * NPROC and f["loss_at_world_1"] == f["trained_loss"], f
    assert sorted(n.split("/")[-1] for n in f["checkpoint_files"]) == files, f
    assert_ran(o.run_dir, SCENARIOS[SID].script_path(variant))  # the shown script is what ran


@pytest.mark.slow
@pytest.mark.parametrize("name,passes,says", TRIES, ids=[t[0] for t in TRIES])
def test_the_grader_takes_another_fix_and_refuses_a_non_fix(runs, name, passes, says):
    v = runs[name]
    assert_verdict(v, passes, says, FIXES / name)
    if not passes: assert v.outcome.diagnosis is not None and "rank 0" in v.reasons[0], v.text()
