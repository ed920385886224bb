"""`distlab doctor` on this machine (no GPU here: the NVML part is one line), its command line, and two nodes compared at launch."""
import json, os, socket, subprocess, sys, textwrap
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
STRAY = ("NCCL_", "GLOO_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "TORCH_DIST_", "MASTER_", "OMP_NUM_THREADS")


def clean_env(**extra) -> dict:
    "This environment without distributed variables (the runner's own could change the verdict), plus `extra`."
    env = {k: v for k, v in os.environ.items() if not k.startswith(STRAY)}
    return {**env, "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]), **extra}


def distlab_doctor(*args, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "distlab.cli", "doctor", *args], capture_output=True, text=True,
                          env=clean_env(**env), timeout=60, cwd=ROOT)


def test_every_check_has_evidence_and_a_fix_and_no_torch_is_imported():
    code = ("import json, sys; from distlab.health.doctor import doctor; r = doctor(nproc=2, workers=2, batch_mib=8); "
            "print(json.dumps({'report': r.to_dict(), 'torch': 'torch' in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    checks = got["report"]["checks"]
    assert not got["torch"], "the doctor imported torch (2.4 s): versions must come from the installed files"
    names = [c["name"] for c in checks]
    assert {"env", "master-addr", "master-port", "shm", "open-files", "threads", "versions"} <= set(names), names
    for c in checks:
        assert c["status"] in ("ok", "warn", "fail") and c["evidence"].strip() and c["fix"].strip(), c
    gpu = [c for c in checks if c["name"].startswith("gpu")]
    try: import torch; has_gpu = torch.cuda.is_available()
    except Exception: has_gpu = False
    if not has_gpu:  # the no-GPU path: one line that says so, and the rest was checked
        assert len(gpu) == 1 and gpu[0]["status"] == "ok" and "GPU" in gpu[0]["evidence"], gpu
    assert "2 ranks x 2 workers x 2 batches x 8 MiB" in next(c for c in checks if c["name"] == "shm")["evidence"]


def test_json_parses_and_a_clean_machine_exits_0():
    out = distlab_doctor("--json", "--no-gpu")
    rep = json.loads(out.stdout)
    assert out.returncode == rep["exit_code"] == 0, (out.returncode, out.stdout, out.stderr)
    assert rep["counts"]["fail"] == 0 and rep["duration_s"] < 5, rep


def test_a_broken_variable_is_named_with_the_interfaces_there_are_and_exits_1():
    out = distlab_doctor("--no-gpu", "--env", "NCCL_SOCKET_IFNAME=eth9", NCCL_SOCKET_IFNAM="lo", NCCL_TIMEOUT="3600000")
    assert out.returncode == 1, out.stdout + out.stderr
    lines = {l.split()[1]: l for l in out.stdout.splitlines() if l[:4] in ("OK  ", "WARN", "FAIL")}
    iface = lines["env:NCCL_SOCKET_IFNAME"]
    assert iface.startswith("FAIL") and "eth9" in iface and "lo" in iface and "->" in iface, iface
    assert "did you mean NCCL_SOCKET_IFNAME?" in lines["env:NCCL_SOCKET_IFNAM"], lines
    assert lines["env:NCCL_TIMEOUT"].startswith("WARN") and "timeout=timedelta" in lines["env:NCCL_TIMEOUT"], lines


def test_a_taken_master_port_is_named_with_its_holder():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); s.listen()
        port = s.getsockname()[1]
        out = distlab_doctor("--json", "--no-gpu", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    rep = json.loads(out.stdout)
    c = next(c for c in rep["checks"] if c["name"] == "master-port")
    assert out.returncode == 1 and c["status"] == "fail", c
    assert str(port) in c["evidence"] and f"pid {os.getpid()}" in c["evidence"] and "--master-port" in c["fix"], c


def test_shared_memory_too_small_for_the_loaders_fails_with_the_size_to_give():
    from distlab.health.env_checks import shm_check
    c = shm_check(4, 4, 2, 16, free_bytes=64 << 20)  # docker's default /dev/shm against 4 ranks x 4 workers x 2 x 16 MiB
    assert c.status == "fail" and "512 MiB in flight" in c.evidence and "at least 1.0 GiB" in c.fix, c.line()


@pytest.mark.parametrize("args, says", [(["--env", "NCCL_DEBUG"], "--env 'NCCL_DEBUG': give NAME=VALUE"),
                                        (["--nproc", "0"], "--nproc 0"), (["--backend", "mpi"], "invalid choice")])
def test_bad_input_is_refused_with_exit_2_and_the_fix(args, says):
    out = distlab_doctor(*args)
    assert out.returncode == 2 and says in out.stderr and not out.stdout, (out.returncode, out.stdout, out.stderr)


NODE_SCRIPT = textwrap.dedent("""
    import os, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.tensor([1.0]); dist.all_reduce(t)
    print(f"node {os.environ['GROUP_RANK']}: sum {t.item():.0f}", flush=True)
    dist.destroy_process_group()
""")


@pytest.mark.slow
def test_two_nodes_that_differ_harmlessly_are_shown_the_difference_and_run(tmp_path):
    "Two `distlab launch` agents on loopback; node 1 has NCCL_DEBUG=INFO (nothing gloo reads): shown, not refused."
    from distlab.rank.events import read_events, event_ranks
    from distlab.run.launch import launch
    from distlab.run.reaper import free_port
    script = tmp_path / "job.py"; script.write_text(NODE_SCRIPT)
    endpoint, lines = f"127.0.0.1:{free_port()}", []
    nodes = [launch(script, nproc=1, nnodes=2, rdzv_endpoint=endpoint, rdzv_id="doctor-nodes", runs_root=tmp_path / f"node{i}",
                    timeout_s=120, join_timeout_s=30, env={"NCCL_DEBUG": "INFO"} if i else {},
                    on_line=lambda r, s, l: lines.append(l)) for i in range(2)]
    results = [n.wait() for n in nodes]
    assert [r.status for r in results] == ["ok", "ok"], [(r.failure, r.diagnosis and r.diagnosis.headline) for r in results]
    notes = [e for r in results for k in event_ranks(r.run_dir) for e in read_events(r.run_dir, k) if "node_differences" in e]
    assert len(notes) == 2, notes
    for n in notes:
        assert [(d["what"], d["values"], d["fatal"]) for d in n["node_differences"]] == [("env:NCCL_DEBUG", [None, "INFO"], False)], n
        assert [f["node"] for f in n["node_facts"]] == [0, 1] and n["took_s"] < 10, n
    assert any("the nodes differ (shown, not refused)" in l for l in lines), lines[-20:]


@pytest.mark.gpu
def test_gpu_checks_read_every_aspect_through_nvml():
    pytest.importorskip("pynvml", reason="nvidia-ml-py (the gpu extra) is not installed")
    from distlab.health.gpu import gpu_checks
    checks = gpu_checks("nccl")
    names = [c.name for c in checks]
    assert names[0] == "gpu:driver" and {"gpu:memory", "gpu:ecc", "gpu:retired-pages", "gpu:throttle", "gpu:temperature",
                                         "gpu:power", "gpu:clocks", "gpu:pcie", "gpu:nvlink", "gpu:topology"} <= set(names), names
    assert all(c.evidence and c.fix for c in checks)
    import torch
    mem = next(c for c in checks if c.name == "gpu:memory").evidence
    assert torch.cuda.get_device_name(0) in mem, mem


IMAGE_ENV = {"NCCL_VERSION": "2.28.3-1", "CUDA_VERSION": "13.0.1", "CUDNN_VERSION": "9.13.0.50",
             "NV_LIBNCCL_DEV_PACKAGE": "libnccl-dev=2.28.3-1+cuda13.0", "NV_LIBNCCL_PACKAGE_VERSION": "2.28.3-1",
             "NV_CUDA_LIB_VERSION": "13.0.1-1", "NVARCH": "x86_64", "NVIDIA_REQUIRE_CUDA": "cuda>=13.0 brand=tesla,driver>=535",
             "NVIDIA_DRIVER_CAPABILITIES": "compute,utility", "NVIDIA_VISIBLE_DEVICES": "all", "PYTORCH_VERSION": "2.11.0",
             "PYTORCH_BUILD_VERSION": "2.11.0", "TORCH_CUDA_ARCH_LIST": "9.0", "CUDA_HOME": "/usr/local/cuda",
             "LIBRARY_PATH": "/usr/local/cuda/lib64/stubs"}


def test_a_container_images_own_variables_are_facts_while_real_settings_beside_them_still_warn():
    "An NVIDIA / PyTorch image's variables (issue 26: `NCCL_VERSION` was 'does nothing, unset it'): ok; real mistakes still warn."
    image = [a for k, v in IMAGE_ENV.items() for a in ("--env", f"{k}={v}")]
    out = distlab_doctor("--json", "--no-gpu", *image)
    rep = json.loads(out.stdout)
    assert out.returncode == 0 and rep["counts"]["warn"] == 0 and rep["counts"]["fail"] == 0, rep["checks"]
    facts = next(c for c in rep["checks"] if c["name"] == "env:image")
    assert facts["status"] == "ok" and "NCCL_VERSION=2.28.3-1" in facts["evidence"], facts
    assert not any(k in c["name"] for c in rep["checks"] for k in IMAGE_ENV), rep["checks"]  # no line of their own
    out = distlab_doctor("--json", "--no-gpu", *image, "--env", "NCCL_P2P_DISABLE=1", "--env", "NCCL_P2P_LEVEL=NVL",
                         "--env", "NCCL_ASYNC_ERROR_HANDLING=1", "--env", "NCCL_VERSON=2.28")
    warned = {c["name"] for c in json.loads(out.stdout)["checks"] if c["status"] == "warn"}
    assert warned == {"env:NCCL_P2P_DISABLE", "env:NCCL_P2P_LEVEL", "env:NCCL_ASYNC_ERROR_HANDLING", "env:NCCL_VERSON"}, warned
