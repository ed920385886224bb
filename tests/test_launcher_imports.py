"""The launcher process never imports torch: `distlab launch` counts GPUs and picks the backend from NVML, the driver's
files and CUDA_VISIBLE_DEVICES, so torchrun starts as soon as bare torchrun would (issue 26: on a GPU host the import
alone cost 3 s a job). The launcher runs under `python -X importtime`, which lists every module it imports, from its
start to its exit; torchrun and the ranks are other processes and import torch as they must."""
import json, os, re, subprocess, sys, textwrap
from pathlib import Path
import pytest

HERE = Path(__file__).resolve().parent
USER_OK = HERE / "scripts" / "user_ok.py"
LAUNCHER = [sys.executable, "-X", "importtime", "-m", "distlab.cli", "launch"]

def torch_modules(stderr: str) -> list[str]:
    "The torch modules a `-X importtime` process imported, from its stderr."
    names = [l.rsplit("|", 1)[1].strip() for l in stderr.splitlines() if l.startswith("import time:") and "|" in l]
    assert names, "no -X importtime lines: the launcher did not run"
    return [n for n in names if re.match(r"torch(\.|$)", n)]

def two_cores():
    "At most two of this process's cores for the child, so `auto` on a CPU host starts at most two ranks."
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])

@pytest.mark.slow
def test_a_launch_with_nproc_auto_runs_every_rank_and_never_imports_torch_in_the_launcher(tmp_path):
    p = subprocess.run(LAUNCHER + ["--nproc-per-node", "auto", "--runs-root", str(tmp_path), str(USER_OK)],
                       capture_output=True, text=True, timeout=180, cwd=tmp_path, preexec_fn=two_cores)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    torchrun = subprocess.run([sys.executable, "-c", "from torch.distributed.run import determine_local_world_size as d; print(d('auto'))"],
                              capture_output=True, text=True, timeout=120, preexec_fn=two_cores)
    world = int(torchrun.stdout.strip())  # what bare torchrun makes of `auto` here, GPUs or cores
    assert sorted(re.findall(r"^rank (\d+): ", p.stdout, re.M)) == [str(r) for r in range(world)], p.stdout
    assert torch_modules(p.stderr) == []

@pytest.mark.parametrize("flags, says", [
    (["--nproc-per-node", "gpu"], "no CUDA GPU torch can use ("),
    (["--nproc-per-node", "1", "--backend", "nccl"], "use backend='gloo'"),
])
def test_a_launch_refused_for_want_of_gpus_says_why_without_importing_torch(tmp_path, flags, says):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # no GPU for the ranks, on any machine
    p = subprocess.run(LAUNCHER + flags + ["--runs-root", str(tmp_path), str(USER_OK)],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert p.returncode == 2 and says in p.stderr, p.stderr[-3000:]
    assert torch_modules(p.stderr) == []
    assert list(tmp_path.iterdir()) == []  # refused before any run directory or process

NCCL_JOB = textwrap.dedent("""\
    import os, torch, torch.distributed as dist
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    t = torch.ones(4, device="cuda")
    dist.all_reduce(t)
    print(f"rank {dist.get_rank()}: {os.environ['DISTLAB_BACKEND']} {t.sum().item()}")
    dist.destroy_process_group()
""")

@pytest.mark.gpu
def test_on_a_gpu_machine_auto_is_nccl_on_every_gpu_and_the_launcher_never_imports_torch(tmp_path):
    (tmp_path / "nccl_job.py").write_text(NCCL_JOB)
    p = subprocess.run(LAUNCHER + ["--nproc-per-node", "gpu", "--backend", "auto", "--runs-root", str(tmp_path), "nccl_job.py"],
                       capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    import torch
    world = torch.cuda.device_count()
    assert sorted(re.findall(r"^rank (\d+): nccl ", p.stdout, re.M)) == sorted(str(r) for r in range(world)), p.stdout
    assert torch_modules(p.stderr) == []

@pytest.mark.gpu
def test_on_a_gpu_machine_a_lesson_with_more_ranks_than_gpus_runs_on_cpu_ranks(tmp_path):
    "The lesson scripts take NCCL and cuda:LOCAL_RANK whenever torch sees a GPU; where `auto` chose gloo (a GPU short), their ranks see none."
    import torch
    n = torch.cuda.device_count() + 1
    p = subprocess.run([sys.executable, "-m", "distlab.cli", "run", "uneven-batches", "--variant", "fixed", "--nproc", str(n),
                        "--runs-root", str(tmp_path), "--json"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    o = json.loads(p.stdout)
    assert o["status"] == "ok" and o["matched"] and len(o["steps_per_rank"]) == n, o

COUNT_IN_TORCH = textwrap.dedent("""\
    import json, os, sys, torch
    out = []
    for value in json.loads(sys.argv[1]):  # torch counts through NVML and caches nothing until CUDA starts
        if value is None: os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else: os.environ["CUDA_VISIBLE_DEVICES"] = value
        out.append(torch.cuda.device_count())
    print(json.dumps(out))
""")

@pytest.mark.gpu
def test_on_a_gpu_machine_the_gpus_counted_without_torch_are_the_ones_torch_counts():
    from distlab.config import cuda_gpus, driver_gpus
    uuids = [u for u in driver_gpus().uuids if u]
    values = [None, "", "-1", "0", "0,0", "0,99", "99", "0,1,2,3,4,5,6,7", "1gpu", "GPU-no-such-gpu"]
    values += [uuids[0], uuids[0][:12], ",".join(reversed(uuids))] if uuids else []
    p = subprocess.run([sys.executable, "-c", COUNT_IN_TORCH, json.dumps(values)], capture_output=True, text=True, timeout=120,
                       env={k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"})
    assert p.returncode == 0, p.stderr[-3000:]
    ours = [cuda_gpus({} if v is None else {"CUDA_VISIBLE_DEVICES": v}).n for v in values]
    assert dict(zip(values, ours)) == dict(zip(values, json.loads(p.stdout))), driver_gpus()
