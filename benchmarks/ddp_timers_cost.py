"""Where the light communication profile's cost per step goes (issue 8): four DDP copies of one MLP in one process
(world 1, gloo), 40 alternating blocks of 50 steps, median per-step time and median paired difference to plain DDP.

    python benchmarks/ddp_timers_cost.py [--device cuda]

`--device cuda`: the copies on one GPU over NCCL (world 1), each block ending with `torch.cuda.synchronize()`;
there DDP's timers are CUDA events, and its runtime stats synchronise on the last iteration's events.

plain     DDP as is
rate1     DDP with _set_ddp_runtime_logging_sample_rate(1): its runtime stats computed every iteration
timers    DDPTimers (what StepProfiler(mode="light") installs) read once per step
nohook    the same without its forward pre-hook
hookonly  DDPTimers installed (pre-hook + rate 1), never read
"""
import os, statistics, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("MASTER_PORT", "29556"), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
import torch, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from distlab.rank.profile import DDPTimers

CUDA = sys.argv[1:] == ["--device", "cuda"]
DEV = torch.device("cuda", 0) if CUDA else torch.device("cpu")
sync = torch.cuda.synchronize if CUDA else (lambda: None)

def mk():
    torch.manual_seed(0)
    return DDP(nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(DEV),
               device_ids=[0] if CUDA else None)

def main():
    if CUDA: torch.cuda.set_device(0)
    dist.init_process_group("nccl" if CUDA else "gloo"); torch.set_num_threads(1)
    x, y = torch.randn(64, 256, device=DEV), torch.randint(0, 10, (64,), device=DEV)
    plain, rate1, timed, nohook = mk(), mk(), mk(), mk()
    rate1._set_ddp_runtime_logging_sample_rate(1)
    t = DDPTimers(timed, read_every=1); t2 = DDPTimers(nohook, read_every=1); t2.remove()  # every step: the cost of one read
    def step(m, after=None):
        nn.functional.cross_entropy(m(x), y).backward()
        for p in m.parameters(): p.grad = None
        if after: after()
    kinds = {"plain": lambda: step(plain), "rate1": lambda: step(rate1), "timers": lambda: step(timed, t.take),
             "nohook": lambda: step(nohook, t2.take), "hookonly": lambda: step(timed)}
    for k in kinds: [kinds[k]() for _ in range(20)]
    res = {k: [] for k in kinds}
    for b in range(40):
        for k in (list(kinds) if b % 2 == 0 else list(reversed(list(kinds)))):
            sync(); t0 = time.perf_counter()
            for _ in range(50): kinds[k]()
            sync()
            res[k].append((time.perf_counter() - t0) / 50 * 1e6)
    for k in kinds:
        print(f"{k:9s} {statistics.median(res[k]):8.1f} us/step  {statistics.median(a - b for a, b in zip(res[k], res['plain'])):6.1f} us over plain")
    dist.destroy_process_group()

if __name__ == "__main__": main()
