"""The communication lessons on real torchrun ranks (gloo, world 2), plain scripts whose every DDP bucket the watch records:
slow-link over an emulated 1 Gbit/s link, and small-buckets. Each variant does what its Expect says, the fixes move the
bytes and times a user cares about, the communication profile reads the same run the same way, and each grader takes
other fixes and refuses a non-fix with the reason."""
import importlib.util
from pathlib import Path
import pytest
from distlab.scenarios import SCENARIOS
from distlab.scenarios.communication import LINK_BYTES_PER_S, BROKEN_BATCH, gradient_steps, slow_link_model_bytes
from distlab.rank.events import event_ranks
from distlab.watch.comm import comm_profile
from helpers import all_gone, assert_ran, assert_verdict, gone_within, run_tries

NPROC = 2
RUNS = {"slow-link": ("broken", "fixed", "fixed-accumulate"), "small-buckets": ("broken", "fixed")}
SL, SB = "slow-link", "small-buckets"
FIXES = Path(__file__).parent / "fixes"
TRIES = [  # (scenario, a learner's script under tests/fixes/<scenario>/, passes?, what the verdict must say)
    (SB, "cap_25mb.py", True, ""),  # the documented default written out (its first bucket 25 MB too): one all-reduce a step
    (SB, "half_mb.py", True, ""),  # 0.5 MB buckets: two a step
    (SB, "static_graph.py", False, "the gradients still cross in 48 all-reduces per step"),  # guide 003's option, the same tiny cap
    (SL, "builtin_fp16.py", True, ""),  # DDP's C++ fp16 compression, registered by its enum: half the bytes
    (SL, "batch_32.py", True, ""),  # 4 x the samples per step, so per all-reduce: a quarter of the bytes per sample
    (SL, "nccl_tuning.py", False, "bytes per sample still cross the link, 100% of the broken script's"),  # guide 004's tuning variables
    (SL, "longer_timeout.py", False, "bytes per sample still cross the link, 100% of the broken script's"),  # a longer timeout
]


pytestmark = pytest.mark.timeout(900)  # the first test here may be the one that runs the walkthrough


@pytest.fixture(scope="module")
def outcomes(walkthroughs):
    "Every variant at world 2: the runs of examples/02_performance.ipynb, run once, one after another (their timings are compared)."
    out = {k: o for k, o in walkthroughs.by_variant("02_performance").items() if k[0] in RUNS}
    assert set(out) == {(sid, v) for sid, vs in RUNS.items() for v in vs}, sorted(out)
    for o in out.values(): gone_within(Path(o.run_dir).name)
    return out


def test_every_variant_matches_its_expectation(outcomes):
    for (sid, v), o in outcomes.items():
        assert o.status == "ok" and o.matched, (sid, v, o.problems, o.figures)


def _script_constants(sid: str, variant: str = "broken"):
    "The lesson script's module, its constants defined; `main` runs only as __main__."
    spec = importlib.util.spec_from_file_location(f"{sid.replace('-', '_')}_{variant}", SCENARIOS[sid].script_path(variant))
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    return m


def test_slow_link_ran_the_scripts_shown(outcomes):
    for v in RUNS[SL]: assert_ran(outcomes[SL, v].run_dir, SCENARIOS[SL].script_path(v), NPROC)


def test_slow_link_broken_sends_float32_every_step_at_the_links_floor(outcomes):
    "Broken: the script's model's float32 gradients cross the link every step of its batch, and the link is busy at least their floor."
    m = _script_constants(SL)
    b = outcomes[SL, "broken"].figures
    assert m.BATCH == BROKEN_BATCH and b["broken_samples_per_step"] == m.BATCH, (m.BATCH, b)
    assert b["broken_bytes_per_step"] == b["fp32_grad_bytes"] == slow_link_model_bytes(), b
    assert b["broken_synced_steps"] == {str(r): m.STEPS for r in range(NPROC)}, b
    assert b["broken_link_ms"] >= 0.99 * b["fp32_link_floor_ms"] and b["broken_step_ms"] >= b["broken_link_ms"], b


def test_fp16_compression_halves_the_bytes_and_the_time_on_the_link(outcomes):
    b, f = outcomes[SL, "broken"].figures, outcomes[SL, "fixed"].figures
    assert f["fixed_bytes_per_step"] * 2 == b["broken_bytes_per_step"], (b, f)
    assert f["fixed_samples_per_step"] == b["broken_samples_per_step"], (b, f)
    assert f["fixed_link_ms"] < 0.75 * b["broken_link_ms"], (b, f)  # measured: 21.5 against 42.7 ms
    assert f["fixed_link_ms_per_sample"] < b["fp32_floor_ms_per_sample"] <= b["broken_link_ms_per_sample"] * 1.01, (b, f)


def test_accumulation_sends_k_times_fewer_bytes_per_sample(outcomes):
    k = _script_constants(SL, "fixed-accumulate").ACCUMULATE
    b, a = outcomes[SL, "broken"].figures, outcomes[SL, "fixed-accumulate"].figures
    assert a["fixed-accumulate_samples_per_step"] == k * b["broken_samples_per_step"], (b, a)
    assert a["fixed-accumulate_bytes_per_step"] == b["broken_bytes_per_step"], (b, a)  # float32, once per k micro-batches
    assert a["fixed-accumulate_bytes_per_sample"] * k == b["broken_bytes_per_sample"], (b, a)
    assert a["fixed-accumulate_link_ms_per_sample"] < b["broken_link_ms_per_sample"] / 2, (b, a)


def test_the_watch_counts_the_scripts_steps(outcomes):
    "Each optimizer step's all-reduce is a step of the progress plot: the scripts' 30, on every rank."
    for v in RUNS[SL]: assert outcomes[SL, v].steps_per_rank == {r: 30 for r in range(NPROC)}, (v, outcomes[SL, v].steps_per_rank)


def test_the_profile_sees_the_emulated_link(outcomes):
    "The communication profile of the plain script: the checks' bytes, and a bus bandwidth of at most the link's 125 MB/s."
    o = outcomes[SL, "broken"]
    prof = comm_profile(o.run_dir).per_op()["all_reduce"]
    steps = [s for r in event_ranks(o.run_dir) for s in gradient_steps(o.run_dir, r)]
    assert prof["bytes"] == sum(s["bytes"] for s in steps), (prof, len(steps))
    assert 0 < prof["busbw_gbps"] <= LINK_BYTES_PER_S / 1e9 * 1.02, prof  # bus factor 2(2-1)/2 = 1


@pytest.fixture(scope="module")
def tries(tmp_path_factory):
    "The tries of both lessons, graded on 2 real gloo ranks, two at a time."
    got = run_tries([(sid, name) for sid, name, _, _ in TRIES], tmp_path_factory.mktemp("tries"), FIXES, NPROC)
    out = {(sid, name): v for (sid, name, _, _), v in zip(TRIES, got)}
    all_gone(out)
    return out


def _grad_bytes() -> int:
    "The lesson model's float32 gradient bytes, from the script's own sizes: LAYERS x (WIDTH^2 + WIDTH) + the 10-way head."
    m = _script_constants(SB)
    return 4 * (m.LAYERS * (m.WIDTH * m.WIDTH + m.WIDTH) + m.WIDTH * 10 + 10)


def test_small_buckets_ran_the_scripts_shown(outcomes):
    for v in ("broken", "fixed"): assert_ran(outcomes[SB, v].run_dir, SCENARIOS[SB].script_path(v), NPROC)


def test_small_buckets_pay_per_collective(outcomes):
    "Broken: an all-reduce per layer; fixed: one a step, the same bytes, and less time on the wire and per step."
    b, f = outcomes[SB, "broken"].figures, outcomes[SB, "fixed"].figures
    assert (b["broken_all_reduces_per_step"], f["fixed_all_reduces_per_step"]) == (48, 1), (b, f)
    assert b["broken_bytes_per_step"] == f["fixed_bytes_per_step"] == _grad_bytes(), (b, f)  # the same gradients either way
    assert b["broken_synced_steps"] == f["fixed_synced_steps"] == {str(r): 30 for r in range(NPROC)}, (b, f)  # the scripts' 30 steps
    for v in ("broken", "fixed"):  # the watch counts them too, one at each backward's last bucket: the progress plot's points
        assert outcomes[SB, v].steps_per_rank == {r: 30 for r in range(NPROC)}, (v, outcomes[SB, v].steps_per_rank)
    assert f["fixed_comm_busy_ms"] < b["broken_comm_busy_ms"] and f["fixed_step_ms"] < b["broken_step_ms"], (b, f)


def test_the_profile_counts_every_bucket_of_the_lesson(outcomes):
    "The communication profile of the plain script: every gradient all-reduce the checks counted, with its bytes."
    prof = {v: comm_profile(outcomes[SB, v].run_dir).per_op()["all_reduce"] for v in ("broken", "fixed")}
    for v, p in prof.items():
        run = outcomes[SB, v].run_dir
        steps = [s for r in event_ranks(run) for s in gradient_steps(run, r)]
        assert (p["count"], p["bytes"]) == (sum(s["all_reduces"] for s in steps), sum(s["bytes"] for s in steps)), (v, p)
        # its time is the wire's busy time on each rank, summed: the queued all-reduces' own times overlap and count once
        assert 0 < p["time_s"] <= NPROC * outcomes[SB, v].duration_s, (v, p, outcomes[SB, v].duration_s)
    # the same bytes, 48 all-reduces a step against 1: a fraction of the bus bandwidth
    assert prof["fixed"]["busbw_gbps"] > 3 * prof["broken"]["busbw_gbps"], prof


@pytest.mark.parametrize("sid,name,passes,says", TRIES, ids=[f"{t[0]}/{t[1]}" for t in TRIES])
def test_the_grader_takes_other_fixes_and_refuses_a_non_fix(tries, sid, name, passes, says):
    assert_verdict(tries[sid, name], passes, says, FIXES / sid / name)
