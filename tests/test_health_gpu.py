"""The health sampler on a real GPU (marked `gpu`: skipped with the reason where there is none): torch's allocator
figures for the rank's device, and NVML's when nvidia-ml-py is installed."""
import pytest

pytestmark = pytest.mark.gpu

def test_a_gpu_rank_samples_its_own_gpu():
    import torch
    from distlab.rank.health import HealthSampler, cuda_device
    hs = HealthSampler(lambda ev, **f: None, environ={})
    assert "gpu" not in hs.sample() and "cuda_alloc_bytes" not in hs.sample()  # before CUDA: nothing GPU, nothing initialised
    x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda:0")  # 64 MiB on the rank's GPU (local rank 0)
    assert cuda_device(0) == 0
    s = hs.sample()
    assert s["cuda_alloc_bytes"] >= 64 << 20 and s["cuda_peak_bytes"] >= s["cuda_alloc_bytes"], s
    try: import pynvml  # noqa: F401
    except ImportError: pytest.skip("nvidia-ml-py is not installed (pip install distlab[gpu]): only torch's figures checked")
    assert s["gpu_mem_total_bytes"] > 2**30 and s["gpu_mem_used_bytes"] >= 64 << 20, s
    assert 0 <= s["gpu_util_pct"] <= 100 and 0 < s["gpu_temp_c"] < 120 and isinstance(s["gpu_throttle"], list), s
    del x
