"""Capture the real logs behind distlab.watch.signatures' fixtures: run each failure script here (plain python,
or torchrun at world 2 on gloo) and write its merged stdout and stderr to tests/fixtures/logs/<signature-id>.txt.

    python tests/scripts/signatures/capture.py [ID ...]      # default: every CPU case below
    python tests/scripts/signatures/capture.py --gpu [--out DIR] [ID ...]   # the NCCL/CUDA cases, on one GPU

The GPU cases need one GPU (NCCL at world 1); fixtures no GPU machine has captured stay reconstructed by hand."""
import os, socket, subprocess, sys
from pathlib import Path
import torch

HERE = Path(__file__).resolve().parent
OUT = HERE.parent.parent / "fixtures" / "logs"

def torchrun(script: str, *args: str, nproc: int = 2, port: int | None = None) -> list[str]:
    where = ["--master-addr", "127.0.0.1", "--master-port", str(port)] if port else ["--standalone"]
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), *where, script, *args]

# id: (argv, extra environment); a port of -1 is replaced by one this process listens on while the case runs
CASES = {
    "healthy": (torchrun("healthy.py"), {}),
    "port-in-use": (torchrun("healthy.py", port=-1), {}),
    "ddp-unused-parameters": (torchrun("unused_params.py"), {"TORCH_DISTRIBUTED_DEBUG": "INFO"}),
    "ddp-model-mismatch": (torchrun("model_mismatch.py"), {}),
    "weights-only-load": ([sys.executable, "weights_only.py"], {}),
    "checkpoint-device": ([sys.executable, "checkpoint_device.py"], {}),
    "dataloader-worker-killed": (torchrun("dataloader_killed.py", "KILL"), {}),
    "dataloader-shm": (torchrun("dataloader_killed.py", "BUS"), {}),
    "cpu-oom": (torchrun("cpu_oom.py"), {}),
    "gloo-size-mismatch": (torchrun("gloo_size_mismatch.py"), {}),
    "socket-interface-missing": (torchrun("healthy.py"), {"GLOO_SOCKET_IFNAME": "eth9"}),
}
GPU_CASES = {  # one GPU: NCCL at world 1
    "nccl-watchdog-timeout": (torchrun("nccl_watchdog.py", nproc=1), {}),
    "cuda-oom": (torchrun("cuda_oom.py", nproc=1), {}),
    "nccl-cpu-tensor": (torchrun("nccl_cpu_tensor.py", nproc=1), {}),
    "checkpoint-device-count": ([sys.executable, "checkpoint_device.py"], {}),  # one GPU: "device_count() is 1"
}

def run_case(case: str) -> str:
    "Run one case; its log as written to the fixture, header line first."
    argv, extra = (CASES | GPU_CASES)[case]
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "TORCH_DISTRIBUTED_DEBUG", "GLOO_SOCKET_IFNAME")} | extra
    with socket.socket() as held:   # only port-in-use uses it: a listener on the port torchrun is told to use
        held.bind(("127.0.0.1", 0)); held.listen()
        argv = [str(held.getsockname()[1]) if a == "-1" else a for a in argv]
        out = subprocess.run(argv, cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, timeout=300).stdout
    shown = " ".join(["python" if a == sys.executable else a for a in argv])
    setting = " with " + " ".join(f"{k}={v}" for k, v in extra.items()) if extra else ""
    head = f"# real log, captured by tests/scripts/signatures/capture.py: {shown}{setting} {_where(case)}\n"
    return head + out.decode(errors="replace")

def _where(case: str) -> str:
    if case not in GPU_CASES: return f"(torch {torch.__version__}, CPU, gloo)"
    return f"(torch {torch.__version__}, {torch.cuda.get_device_name(0)}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))})"

def capture(case: str) -> Path:
    "Run one case and write its log to its fixture; returns the fixture's path."
    path = OUT / f"{case}.txt"
    path.write_text(run_case(case))
    return path

if __name__ == "__main__":
    args = sys.argv[1:]
    gpu = "--gpu" in args
    if "--out" in args: i = args.index("--out"); OUT = Path(args[i + 1]).resolve(); del args[i:i + 2]
    args = [a for a in args if a != "--gpu"]
    OUT.mkdir(parents=True, exist_ok=True)
    for case in args or (GPU_CASES if gpu else CASES):
        print(capture(case), flush=True)
