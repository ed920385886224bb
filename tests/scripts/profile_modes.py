"""Both StepProfiler modes on one job: two DDP copies of one model, one timed by DDP's own timers (light), one bucket by
bucket (buckets), stepping in turn; the last rank computes `delay_s` longer each step, so the others wait for it.
argv: OUT_DIR [delay_s=0.04] [steps=10]. Each rank writes OUT_DIR/rank{R}.json: per mode, each step's figures."""
import json, os, sys, time
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from distlab.rank.profile import StepProfiler

out_dir = sys.argv[1]
delay_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.04
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 10
backend = "nccl" if torch.cuda.is_available() else "gloo"
dist.init_process_group(backend)
rank, world = dist.get_rank(), dist.get_world_size()
device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if backend == "nccl" else torch.device("cpu")
if backend == "nccl": torch.cuda.set_device(device)
torch.manual_seed(0)
net = lambda: nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)).to(device)
ids = [device.index] if backend == "nccl" else None
models = {m: DDP(net(), device_ids=ids, bucket_cap_mb=0.5) for m in ("light", "buckets")}
profs = {m: StepProfiler(model, mode=m, emit_events=False) for m, model in models.items()}
slow = rank == world - 1

def step(mode: str, backwards: int = 1):
    model, prof = models[mode], profs[mode]
    for x in prof.data([torch.randn(32, 256, device=device) for _ in range(backwards)]):
        out = model(x)
        if slow:
            if backend == "nccl": torch.cuda._sleep(int(delay_s * 1e9))  # ~1 cycle per ns: the GPU, not the host, is slow
            else: time.sleep(delay_s)
        out.square().mean().backward()
    return prof.step_done(samples=32 * backwards)

for i in range(steps):
    for mode in ("light", "buckets") if i % 2 else ("buckets", "light"): step(mode)
doubles = {mode: step(mode, backwards=2).comm_bytes for mode in ("light", "buckets")}  # all-reducing two micro-batches
grad_bytes = sum(p.numel() * p.element_size() for p in models["light"].parameters())
res = {"rank": rank, "world": world, "backend": backend, "grad_bytes": grad_bytes, "double_step_bytes": doubles,
       **{m: [{**r.event_fields(), "n_buckets": len(r.buckets)} for r in profs[m].records[:steps]] for m in profs}}
with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f: json.dump(res, f)
dist.destroy_process_group()
