"""The checkpoints lessons (distlab.scenarios.checkpoints) on real ranks at world 2: each broken script fails the way
its lesson says, with the script's own lines and figures, each fixed script passes its checks and is the file that
ran, the full-disk lesson leaves no mount behind, and the grader takes a second, different fix and refuses a non-fix
of four scenarios. The broken and fixed runs are walkthrough 05's (made once per session); the 12 tries go two at a time."""
from pathlib import Path
import pytest
from distlab.scenarios import SCENARIOS, unmet_needs
from distlab.scenarios.checkpoints import SLOW_SAVES, SLOW_STATE_BYTES, mounts_under
from helpers import assert_ran, assert_verdict, lesson_runs, traceback_line

FIXES = Path(__file__).parent / "fixes"
NPROC = 2
LESSONS = sorted(sid for sid, s in SCENARIOS.items() if s.family == "checkpoints" and s.has_lesson)
# (scenario, a learner's script, passes?, what the verdict must say)
TRIES = [
    ("checkpoint-torn-write", "file_per_save.py", True, ""),  # a new file per save, the newest that loads
    ("checkpoint-torn-write", "flush_in_place.py", False, "failed finding central directory"),  # fsync'd, still in place
    ("checkpoint-disk-full", "room_first.py", True, ""),  # serialise in memory, write only if it fits
    ("checkpoint-disk-full", "make_room_first.py", False, "not loaded"),  # delete the old one to make room
    ("unsafe-load", "default_load.py", True, ""),  # torch.load's own default (weights_only=True since torch 2.6)
    ("unsafe-load", "fall_back.py", False, "code ran in"),  # the safe load, then the unsafe one when it refuses
    ("checkpoint-device-map", "map_to_cpu.py", True, ""),  # map_location="cpu", then the model moves to the rank's device
    ("checkpoint-device-map", "rename_device.py", True, ""),  # map_location={"cuda:1": device}: the file's device renamed
    ("checkpoint-device-map", "fresh_on_failure.py", False, "did not load the checkpoint"),  # catch the error, start from fresh weights
    ("slow-checkpoint", "serialise_in_memory.py", True, ""),  # torch.save into memory on the path, the bytes written in a thread
    ("slow-checkpoint", "pool_and_deepcopy.py", True, ""),  # copy.deepcopy, then a one-worker ThreadPoolExecutor writes
    ("slow-checkpoint", "save_less_often.py", False, "saving less often"),  # a third of the saves, each as slow
]

pytestmark = pytest.mark.timeout(900)


def test_the_lessons_and_tries():
    assert {"checkpoint-torn-write", "checkpoint-disk-full", "checkpoint-cleanup", "checkpoint-every-rank-writes", "resume-drift", "preemption",
            "checkpoint-prefix", "slow-checkpoint", "unsafe-load", "checkpoint-device-map"} <= set(LESSONS)
    assert all((FIXES / s / n).is_file() for s, n, _, _ in TRIES)
    both = [sid for sid in LESSONS if {p for s, _, p, _ in TRIES if s == sid} == {True, False}]
    assert len(both) >= 4, both


def test_the_full_disk_needs_root_and_says_so():
    s = SCENARIOS["checkpoint-disk-full"]
    assert s.needs_root and unmet_needs(s, euid=0) is None
    why = unmet_needs(s, euid=1000, status="CapEff:\t0000000000000000\n")
    assert why.startswith("not run: checkpoint-disk-full needs root"), why


@pytest.fixture(scope="module")
def runs(walkthroughs, tmp_path_factory):
    "Both variants of every checkpoints lesson (walkthrough 05's runs) and every try on 2 real gloo ranks, two at a time."
    if unmet_needs(SCENARIOS["checkpoint-disk-full"]): pytest.skip(unmet_needs(SCENARIOS["checkpoint-disk-full"]))
    root = tmp_path_factory.mktemp("checkpoints")
    return lesson_runs(walkthroughs, ["05_checkpoints"], LESSONS, TRIES, root, FIXES, NPROC, variants=("broken", "fixed"))


def traceback_of(o) -> str:
    return (o.failure or {}).get("traceback") or ""


at_line = traceback_line  # how a traceback names the broken script's line that starts with a snippet


# what each broken run must show beyond its Expect and checks: the script's own line, the figures the lesson quotes
def check_torn(o):
    assert at_line("checkpoint-torn-write", "state = torch.load(CKPT") in traceback_of(o), traceback_of(o)[-600:]
    assert o.figures["torn_checkpoint_bytes"] == 4096 < o.figures["whole_checkpoint_bytes"], o.figures

def check_disk_full(o):
    assert o.diagnosis["culprit_ranks"] == [0], o.diagnosis
    assert at_line("checkpoint-disk-full", "last = torch.load(CKPT") in traceback_of(o), traceback_of(o)[-600:]
    assert o.figures["failed_saves_at_steps"] == [4, 8] and "unexpected pos" in o.figures["save_error"], o.figures
    assert o.figures["mounts_left"] == [] and mounts_under(Path(o.run_dir)) == [], o.figures

def check_every_rank(o):
    # the file is whichever write ended last (every rank but that one lost), or the writes interleaved into a file that
    # does not load, or that loads and names a rank whose bytes are not its own (every rank lost: a clean-clone CI saw
    # {'ranks_in_file': '0', 'ranks_whose_state_was_lost': [0, 1]})
    assert o.figures["writers"] == NPROC and len(o.figures["ranks_whose_state_was_lost"]) in (NPROC - 1, NPROC), o.figures

def check_drift(o):
    assert o.figures["first_differing_step"] == o.figures["resumed_at_step"] == 10, o.figures
    assert o.figures["differing_steps"] == NPROC * (24 - 10), o.figures  # every step after the resume, on every rank

def check_preemption(o):
    assert (o.figures["resumed_at_step"], o.figures["steps_redone"]) == (10, 3), o.figures  # saved at 10, signalled at 13
    assert o.figures["generation_0_ended"] == "killed by SIGTERM", o.figures

def check_prefix(o):
    assert o.figures["saved_first_key"] == "module.0.weight", o.figures
    assert at_line("checkpoint-prefix", "plain.load_state_dict(") in traceback_of(o), traceback_of(o)[-600:]

def check_unsafe(o):
    assert o.figures["code_ran_in"] == [f"code-ran-in-rank{r}" for r in range(NPROC)], o.figures  # the planted code ran in every rank

def check_device_map(o):
    assert o.figures["resumed"] == [] and "deserialize object on a CUDA device" in o.figures["error"], o.figures
    assert at_line("checkpoint-device-map", "state = torch.load(CKPT") in traceback_of(o), traceback_of(o)[-600:]
    assert "map_location=device" in o.diagnosis["fix"] or "map_location=device" in o.diagnosis_text, o.diagnosis_text

def check_cleanup(o):
    assert (o.figures["kept_after_clean_up"], o.figures["resume_at_step"], o.figures["steps_lost"]) == ([], 0, 12), o.figures

def check_slow(o):
    assert o.figures["saved_steps"] == list(SLOW_SAVES) and o.figures["bytes_per_save"] >= SLOW_STATE_BYTES, o.figures
    assert o.figures["stall_ms_per_save"] > o.figures["step_ms"], o.figures  # each save cost every rank more than a step

CHECKS = {"slow-checkpoint": check_slow, "checkpoint-cleanup": check_cleanup, "checkpoint-torn-write": check_torn, "checkpoint-disk-full": check_disk_full, "checkpoint-every-rank-writes": check_every_rank,
          "resume-drift": check_drift, "preemption": check_preemption, "checkpoint-prefix": check_prefix, "unsafe-load": check_unsafe,
          "checkpoint-device-map": check_device_map}
FIXED = {"checkpoint-torn-write": {"resumed_from_step": 8}, "checkpoint-disk-full": {"loaded_step": 0, "said_it_was_kept": True},
         "checkpoint-every-rank-writes": {"writers": 1}, "checkpoint-cleanup": {"resume_at_step": 12, "steps_lost": 0}, "resume-drift": {"differing_steps": 0},
         "preemption": {"steps_redone": 0, "differing_steps": 0, "saved_on_sigterm_at_step": 13}, "checkpoint-prefix": {"saved_first_key": "0.weight"},
         "slow-checkpoint": {"saved_steps": list(SLOW_SAVES)}, "checkpoint-device-map": {"resumed_at_steps": [1200]}}


@pytest.mark.slow
@pytest.mark.parametrize("sid", sorted(CHECKS))
def test_broken_fails_as_the_lesson_says(runs, sid):
    o = runs["run", sid, "broken"]
    assert o.matched, f"{o.problems}\n{o.diagnosis_text}"
    CHECKS[sid](o)


@pytest.mark.slow
@pytest.mark.parametrize("sid", sorted(FIXED))
def test_fixed_passes_and_is_the_file_shown(runs, sid):
    o = runs["run", sid, "fixed"]
    assert o.matched and o.diagnosis is None, f"{o.problems}\nfailure: {o.failure}\n{o.diagnosis_text or ''}"
    assert {k: o.figures.get(k) for k in FIXED[sid]} == FIXED[sid], o.figures
    assert_ran(o.run_dir, SCENARIOS[sid].script_path("fixed"))  # the shown script is what ran


@pytest.mark.slow
def test_the_unsafe_file_is_refused_and_nothing_runs(runs):
    o = runs["run", "unsafe-load", "fixed"]  # the fix is the refusal: the rank stops with torch's error, named by its signature
    assert o.matched and o.status == "failed" and o.figures == {"code_ran_in": [], "refused": True}, (o.problems, o.figures)
    assert at_line_fixed("unsafe-load", "state = torch.load(CKPT") in traceback_of(o), traceback_of(o)[-600:]
    assert_ran(o.run_dir, SCENARIOS["unsafe-load"].script_path("fixed"))


@pytest.mark.slow
def test_the_background_save_writes_as_much_and_stalls_far_less(runs):
    b, f = runs["run", "slow-checkpoint", "broken"].figures, runs["run", "slow-checkpoint", "fixed"].figures
    assert abs(f["bytes_per_save"] - b["bytes_per_save"]) < 0.01 * b["bytes_per_save"], (b, f)  # the same checkpoint
    assert f["stalled_share"] < b["stalled_share"] / 2, (b, f)  # of the write's time, the training lost under half as much


def at_line_fixed(sid: str, snippet: str) -> str: return traceback_line(sid, snippet, "fixed")


@pytest.mark.slow
@pytest.mark.parametrize("sid,name,passes,says", TRIES, ids=[f"{c[0]}/{c[1]}" for c in TRIES])
def test_the_grader_takes_another_fix_and_refuses_a_non_fix(runs, sid, name, passes, says):
    v = runs["try", sid, name]
    assert_verdict(v, passes, says, FIXES / sid / name)
    if not passes and v.outcome.status != "ok" and not SCENARIOS[sid].launch_options.get("max_restarts"):  # the watcher's who (with a restart, a loaded
        assert v.outcome.diagnosis is not None and "rank 0" in v.reasons[0], v.text()  # machine may end it undiagnosed: see the report)
