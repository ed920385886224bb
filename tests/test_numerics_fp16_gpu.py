"""The fp16-overflow lesson on a real CUDA GPU: its scripts (lessons/fp16-overflow/) pick nccl and the rank's GPU when
CUDA is there, so float16 autocast and torch.amp.GradScaler("cuda") run on the GPU; the scenario's own checks judge
each run, as on CPU ranks.

Marked `gpu` (skipped where torch.cuda.is_available() is False). One rank on an nccl group; two ranks only where
there are two GPUs (the scripts put rank r on cuda:r, as every lesson script does, and nccl takes one rank per GPU).
"""
import pytest
import torch
from distlab.scenarios.runner import run_scenario

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def _run(tmp_path, variant: str, nproc: int):
    o = run_scenario("fp16-overflow", variant, nproc=nproc, backend="nccl", runs_root=tmp_path, timeout_s=180)
    assert o.matched, (o.problems, o.failure, o.figures)
    return o.figures


@pytest.mark.timeout(300)
def test_cuda_fp16_without_a_scaler_goes_nan_at_the_overflowing_batch(tmp_path):
    f = _run(tmp_path, "broken", 1)
    assert f["broken_nan_step"] == 8 and f["broken_input_max_abs"] > 65504 and f["broken_finite_losses_after"] == 0, f


@pytest.mark.timeout(300)
def test_cuda_scaler_skips_the_overflowing_steps(tmp_path):
    f = _run(tmp_path, "fixed", 1)
    steps = sorted({s for s, _ in f["fixed_overflowing_batches"]})
    assert steps == [8, 20, 31] and set(steps) <= set(f["fixed_skipped_steps"]), f
    assert f["fixed_loss_scale_end"] < f["fixed_loss_scale_start"] and f["fixed_loss_last"] < f["fixed_loss_first"], f


@pytest.mark.timeout(300)
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="two nccl ranks need two GPUs (the lesson scripts put rank r on cuda:r)")
def test_two_nccl_ranks_spread_one_ranks_overflow(tmp_path):
    f = _run(tmp_path, "broken", 2)
    assert f["broken_non_finite_loss_ranks"] == [1] and f["broken_non_finite_grad_ranks"] == [0, 1], f
