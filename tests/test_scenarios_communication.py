"""The communication scenarios on real torchrun ranks (gloo, world 2): each variant does what its Expect says, the
fixes move the bytes and times a user cares about, and the communication profile reads the same run the same way."""
from pathlib import Path
import pytest
from distlab.scenarios.communication import LINK_BYTES_PER_S
from distlab.watch.comm import comm_profile
from helpers import gone_within

NPROC = 2
RUNS = {"slow-link": ("broken", "fixed", "fixed-accumulate"), "small-buckets": ("broken", "fixed")}


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


def test_bf16_compression_halves_the_bytes_and_the_time_per_sample_drops(outcomes):
    b, f = outcomes[("slow-link", "broken")].figures, outcomes[("slow-link", "fixed")].figures
    assert f["fixed_bytes_per_step"] * 2 == b["broken_bytes_per_step"] == b["fp32_grad_bytes"]
    assert f["fixed_comm_wait_s"] < b["broken_comm_wait_s"]
    assert f["fixed_s_per_sample"] < b["broken_s_per_sample"]


def test_accumulation_sends_k_times_fewer_bytes_per_sample(outcomes):
    b, a = outcomes[("slow-link", "broken")].figures, outcomes[("slow-link", "fixed-accumulate")].figures
    assert a["fixed-accumulate_samples_per_step"] == 4 * b["broken_samples_per_step"]
    assert a["fixed-accumulate_bytes_per_sample"] * 4 == b["broken_bytes_per_sample"]
    assert a["fixed-accumulate_s_per_sample"] < b["broken_s_per_sample"]


def test_the_profile_sees_the_emulated_link(outcomes):
    "Bytes and busy time agree with the steps' own records; the buckets' bus bandwidth is at most the link's 125 MB/s."
    o = outcomes[("slow-link", "broken")]
    prof = comm_profile(o.run_dir)
    ddp = prof.per_op()["ddp:all_reduce"]
    steps = prof.steps
    assert ddp["bytes"] == sum(s["comm_bytes"] for s in steps)
    assert ddp["time_s"] == pytest.approx(sum(s["comm_busy_s"] for s in steps), abs=1e-5 * len(steps))
    assert ddp["busbw_gbps"] == pytest.approx(ddp["bytes"] / 1e9 / ddp["time_s"])  # bus factor 2(2-1)/2 = 1
    assert 0 < ddp["busbw_gbps"] <= LINK_BYTES_PER_S / 1e9 * 1.02, ddp
    assert prof.step_summary()["all"]["comm_bytes"] == o.figures["broken_bytes_per_step"]


def test_small_buckets_pay_per_collective(outcomes):
    b, f = outcomes[("small-buckets", "broken")], outcomes[("small-buckets", "fixed")]
    assert b.figures["broken_buckets_per_step"] >= 20 and f.figures["fixed_buckets_per_step"] <= 2
    assert b.figures["broken_bytes_per_step"] == f.figures["fixed_bytes_per_step"]  # the same gradients either way
    assert f.figures["fixed_comm_wait_s"] < b.figures["broken_comm_wait_s"]
    pb, pf = comm_profile(b.run_dir).per_op()["ddp:all_reduce"], comm_profile(f.run_dir).per_op()["ddp:all_reduce"]
    assert 0 < pb["busbw_gbps"] < pf["busbw_gbps"], (pb, pf)  # the same bytes in fewer, larger all-reduces move faster
