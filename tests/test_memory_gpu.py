"""The memory family's GPU path: a real torch.cuda.OutOfMemoryError, and one GPU shared by two gloo ranks as a 12 + 8 cluster.

Marked `gpu` (skipped where torch.cuda.is_available() is False). The rank code is the family's own
(`distlab.scenarios.memory`), run through the launcher with `device="cuda"` and budgets in MiB of GPU memory over
what each rank holds after its warm-up (on an H100, torch 2.11: 66 MiB, mostly cuBLAS's workspaces; a step of the
whole batch then reserves 134 MiB more, micro-batches of an eighth 44 MiB).
"""
import pytest
from distlab.config import TrainConfig
from distlab.contract import FAST_EXIT_ENV
from distlab.rank.worker import worker_spec
from distlab.run.launch import launch

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
P = "distlab.scenarios.memory"


def _run(tmp_path, name, params, nproc, backend):
    from distlab.scenarios.memory import OOM_MODEL
    spec = worker_spec("oom", name, f"{P}:train_with_budget", {**OOM_MODEL, "vocab": 2048, "steps": 2, "device": "cuda", **params},
                       TrainConfig().to_dict())
    return launch("distlab.rank.worker", [spec], module=True, nproc=nproc, backend=backend, name=name,
                  runs_root=tmp_path, env={FAST_EXIT_ENV: "1"}, timeout_s=180).wait()


@pytest.mark.timeout(300)
def test_real_cuda_oom_is_diagnosed(tmp_path):
    res = _run(tmp_path, "cuda-oom", {"budget_mib": 80}, nproc=1, backend="nccl")  # the whole batch needs ~134 MiB over the baseline
    assert res.status == "failed" and res.diagnosis is not None and res.diagnosis.kind == "rank-died"
    assert "OutOfMemoryError" in (res.failure or {}).get("traceback", ""), res.failure
    assert "CUDA out of memory" in res.diagnosis.text(), res.diagnosis.text()  # the cuda-oom signature names it


@pytest.mark.timeout(300)
def test_fixed_variant_fits_the_same_gpu_budget(tmp_path):
    from distlab.scenarios.memory import OOM_MODEL, rank_peaks
    res = _run(tmp_path, "cuda-accumulate", {"budget_mib": 80, "micro_batch": OOM_MODEL["batch"] // 8}, nproc=1, backend="nccl")
    assert res.status == "ok", res.failure
    peak = rank_peaks(res.run_dir)[0]
    assert peak["peak_bytes"] <= peak["budget_bytes"], peak


@pytest.mark.timeout(300)
def test_one_gpu_as_a_12_and_8_cluster(tmp_path):
    # two gloo ranks on one GPU, each capped with set_per_process_memory_fraction: rank 1 gets the small "card"
    res = _run(tmp_path, "cuda-uneven", {"budgets_mib": [400, 48]}, nproc=2, backend="gloo")
    assert res.status == "failed" and res.diagnosis is not None and res.diagnosis.kind == "rank-died"
    assert list(res.diagnosis.culprit_ranks) == [1], res.diagnosis.text()


@pytest.mark.timeout(400)
def test_the_memory_lessons_fail_and_are_fixed_on_one_gpu(tmp_path):
    # the catalogue's own runs at world 1 on NCCL: the GPU budgets of the scenarios (DISTLAB_GPU_MEMORY_BUDGET_MIB), torch's
    # real CUDA out-of-memory error, CPU offload as the one-GPU fix, the fused attention kernel against the math backend
    from pathlib import Path
    from distlab.scenarios import run_scenario
    from distlab.scenarios.lesson import try_fix
    runs = {(sid, v): run_scenario(sid, v, nproc=1, backend="nccl", runs_root=tmp_path)
            for sid, v in (("oom", "broken"), ("oom", "fixed-offload"), ("attention-memory", "broken"), ("attention-memory", "fixed"))}
    for key, o in runs.items(): assert o.matched, (key, o.status, o.problems, o.figures)
    assert runs["oom", "broken"].figures["broken_signature"] == "cuda-oom", runs["oom", "broken"].figures
    off = runs["oom", "fixed-offload"].figures
    assert off["offload_params_mib"] + off["offload_optimizer_mib"] < 1, off  # the state lives in host memory
    assert runs["attention-memory", "broken"].figures["attention_broken_failed_asked_mib"] >= 64, runs["attention-memory", "broken"].figures
    math = try_fix("attention-memory", Path(__file__).parent / "fixes" / "attention-memory" / "math_backend.py", nproc=1,
                   backend="nccl", runs_root=tmp_path)
    assert not math.passed and "out of memory" in " ".join(math.reasons).lower(), math.reasons
