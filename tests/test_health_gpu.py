"""The health sampler on a real GPU (marked `gpu`: skipped with the reason where there is none): torch's allocator
figures for the rank's device, and NVML's when nvidia-ml-py is installed. Run in a fresh interpreter, as a rank is:
other tests in this process may have initialised CUDA already, and "nothing GPU before CUDA" is part of the check."""
import json, os, subprocess, sys, textwrap
from pathlib import Path
import pytest

pytestmark = pytest.mark.gpu

RANK = textwrap.dedent("""
    import json, torch
    from distlab.rank.health import HealthSampler, cuda_device
    hs = HealthSampler(lambda ev, **f: None, environ={})
    before = hs.sample()
    x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda:0")  # 64 MiB on the rank's GPU (local rank 0)
    try: import pynvml; nvml = True
    except ImportError: nvml = False
    print(json.dumps({"before": before, "device": cuda_device(0), "after": hs.sample(), "nvml": nvml}))
""")

def test_a_gpu_rank_samples_its_own_gpu():
    p = subprocess.run([sys.executable, "-c", RANK], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    before, s = got["before"], got["after"]
    assert "gpu" not in before and "cuda_alloc_bytes" not in before, before  # before CUDA: nothing GPU, nothing initialised
    assert got["device"] == 0
    assert s["cuda_alloc_bytes"] >= 64 << 20 and s["cuda_peak_bytes"] >= s["cuda_alloc_bytes"], s
    if not got["nvml"]: pytest.skip("nvidia-ml-py is not installed (pip install distlab[gpu]): only torch's figures checked")
    assert s["gpu_mem_total_bytes"] > 2**30 and s["gpu_mem_used_bytes"] >= 64 << 20, s
    assert 0 <= s["gpu_util_pct"] <= 100 and 0 < s["gpu_temp_c"] < 120 and isinstance(s["gpu_throttle"], list), s
