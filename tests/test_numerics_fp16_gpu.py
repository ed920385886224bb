"""The fp16-overflow scenario on a real CUDA GPU: float16 autocast with torch.amp.GradScaler("cuda"), and without one.

Marked `gpu` (skipped where torch.cuda.is_available() is False). The rank code is the scenario's own
(`distlab.scenarios.numerics_fp16:fp16_overflow`), run through the launcher on an nccl group of one rank, and
on two gloo ranks sharing the GPU (`device="cuda"`); the scenario's own checks judge each run.
"""
import pytest
from distlab.config import TrainConfig
from distlab.contract import FAST_EXIT_ENV
from distlab.rank.worker import worker_spec
from distlab.run.launch import launch

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def _run(tmp_path, variant: str, nproc: int, backend: str, **params):
    from distlab.scenarios import get_scenario
    s = get_scenario("fp16-overflow")
    v = s.variant(variant)
    train = TrainConfig.from_dict({**TrainConfig().to_dict(), **s.train}).to_dict()  # as the scenario runner builds it
    spec = worker_spec(s.id, variant, s.rank_fn, {**v.params, **params}, train)
    return launch("distlab.rank.worker", [spec], module=True, nproc=nproc, backend=backend, name=f"fp16-{variant}",
                  runs_root=tmp_path, env={FAST_EXIT_ENV: "1"}, timeout_s=180).wait()


def _check(name: str, result):
    from distlab.scenarios import numerics_fp16
    m = getattr(numerics_fp16, name)(result)
    assert m.problems == [], (m.problems, m.figures)
    return m.figures


@pytest.mark.timeout(300)
def test_cuda_fp16_without_a_scaler_is_stopped_where_it_overflowed(tmp_path):
    res = _run(tmp_path, "broken", 1, "nccl")
    assert res.status == "failed" and res.diagnosis is not None and res.diagnosis.kind == "rank-died"
    f = _check("check_fp16_broken", res)
    assert f["broken_nan_step"] == 8 and "body.0" in f["broken_first_overflow"], f


@pytest.mark.timeout(300)
def test_cuda_scaler_and_bf16_train_through_the_outliers(tmp_path):
    res = _run(tmp_path, "fixed", 1, "nccl")
    assert res.status == "ok", res.failure
    f = _check("check_fp16_scaler", res)
    assert f["fixed_skipped_steps"][-3:] == [8, 20, 31] and f["fixed_loss_scale_end"] < f["fixed_loss_scale_start"], f
    _check("check_bf16_reference", res)


@pytest.mark.timeout(300)
def test_two_gloo_ranks_on_one_gpu_spread_one_ranks_overflow(tmp_path):
    res = _run(tmp_path, "broken", 2, "gloo", device="cuda")
    assert res.status == "failed", res.failure
    f = _check("check_fp16_broken", res)
    assert f["broken_non_finite_loss_ranks"] == [1] and f["broken_non_finite_grad_ranks"] == [0, 1], f
