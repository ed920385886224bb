"""The ledger's own cost, in one process: the same all_reduce and the same DDP step, with recording on and
off (the wrappers in pass-through mode), interleaved call by call so that load from other processes hits both
alike. Prints one JSON object. Run by benchmarks/run.py."""
import os, sys, json, tempfile, time, statistics
d = tempfile.mkdtemp(); os.environ.update(DISTLAB_RUN_DIR=d, RANK="0")  # the ledger records only inside a distlab run
import torch, torch.distributed as dist
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=f"file://{d}/store", world_size=1, rank=0)
from distlab import ledger
ledger.install()
tl = ledger.LEDGER.tl
t = torch.ones(1)
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
    torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)))
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
def colls(n=500):
    t0 = time.perf_counter()
    for _ in range(n): dist.all_reduce(t)
    return (time.perf_counter() - t0) / n
def steps(n=20):
    t0 = time.perf_counter()
    for _ in range(n):
        loss = torch.nn.functional.cross_entropy(model(x), y); model.zero_grad(); loss.backward()
    return (time.perf_counter() - t0) / n
res = {k: [] for k in ("coll_pass", "coll_rec", "step_pass", "step_rec")}
for _ in range(30):
    for depth, tag in ((1, "pass"), (0, "rec")):
        tl.depth = depth; res["coll_" + tag].append(colls())
for _ in range(1500):  # single steps, alternating: load from other processes hits both alike
    for depth, tag in ((1, "pass"), (0, "rec")):
        tl.depth = depth; res["step_" + tag].append(steps(1))
tl.depth = 0
m = {k: min(v) for k, v in res.items() if k.startswith("coll")}  # min over rounds: least disturbed by other load
m.update({k: statistics.median(v[100:]) for k, v in res.items() if k.startswith("step")})
print(json.dumps({"per_collective_us": round((m["coll_rec"] - m["coll_pass"]) * 1e6, 1),
                  "all_reduce_us_pass_through": round(m["coll_pass"] * 1e6, 1),
                  "ddp_step_ms_pass_through": round(m["step_pass"] * 1e3, 3), "ddp_step_ms_recorded": round(m["step_rec"] * 1e3, 3),
                  "ddp_step_overhead_pct": round((m["step_rec"] / m["step_pass"] - 1) * 100, 2)}))
dist.destroy_process_group()
