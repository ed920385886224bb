"""Asynchronous checkpointing's cost to training, in one process: the step time while an `AsyncCheckpointer` save is in
flight against the step time with none, in alternating rounds (so load from other processes hits both alike).

World 1 with a gloo group (as a rank of a DDP job would have), an MLP of ~WIDTH^2 parameters trained with SGD+momentum;
each round trains STEPS steps with no save, then starts a save and trains until it is on disk. Also reports what a
save blocks the loop for (staging to host memory), how long the write runs beside training, and what a synchronous
rank-0 single-file save of the same state costs. Target: in-flight / no-save step time <= 1.2. Prints one JSON object."""
import os, sys, json, tempfile, time, statistics, warnings
WIDTH = int(sys.argv[1]) if len(sys.argv) > 1 else 2048  # 2048: ~8.9 M parameters, ~70 MB of model + momentum
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
warnings.simplefilter("ignore")
import torch, torch.distributed as dist
torch.set_num_threads(1)
d = tempfile.mkdtemp()
dist.init_process_group("gloo", init_method=f"file://{d}/store", world_size=1, rank=0)
from distlab.train.checkpoint import CheckpointDir, save_on_rank0
from distlab.train.checkpoint_sharded import AsyncCheckpointer, training_state_dict

torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
    torch.nn.Linear(256, WIDTH), torch.nn.ReLU(), torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(), torch.nn.Linear(WIDTH, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))

def step() -> float:
    t0 = time.perf_counter()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    return time.perf_counter() - t0

for _ in range(5): step()  # warm-up (and momentum buffers exist)
ac = AsyncCheckpointer(os.path.join(d, "async"), keep=1)
ck = CheckpointDir(os.path.join(d, "sync"), keep=1)
plain, in_flight, stage, write, sync = [], [], [], [], []
for r in range(ROUNDS):
    plain_round = [step() for _ in range(10)]
    rec = ac.save(training_state_dict(model, opt), r)
    fut = ac.pending[2]
    flight = []
    while not fut.done(): flight.append(step())
    ac.wait()
    stage.append(rec["stage_s"]); write.append(ac.timings[-1]["write_s"])
    plain += plain_round; in_flight += flight
    t0 = time.perf_counter(); save_on_rank0({"model": model.module.state_dict(), "optimizer": opt.state_dict()}, ck, r)
    sync.append(time.perf_counter() - t0)
med = statistics.median
ms = lambda s: round(s * 1e3, 2)
print(json.dumps({"params": sum(p.numel() for p in model.parameters()), "rounds": ROUNDS,
                  "step_ms_no_save": ms(med(plain)), "step_ms_save_in_flight": ms(med(in_flight)) if in_flight else None,
                  "steps_in_flight": len(in_flight), "ratio": round(med(in_flight) / med(plain), 3) if in_flight else None,
                  "async_blocked_ms": ms(med(stage)), "async_write_ms": ms(med(write)), "sync_rank0_save_ms": ms(med(sync)),
                  "target_ratio_max": 1.2}))
dist.destroy_process_group()
