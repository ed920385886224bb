"""The health sampler's cost on a training step, in one process: the same CPU training loop in alternating blocks
with and without a `HealthSampler` thread writing `health` events to a real event file.

The default period (1 s) is longer than a block, so the sampler runs at `PERIOD_S` (default 0.1 s, 10x the default
rate) and the overhead at the default rate is that figure divided by the rate ratio; the cost of one sample
(psutil's reading of /proc and the event line, on the sampling thread) is timed directly too.
Prints one JSON object. `python benchmarks/health_overhead.py [WIDTH] [PERIOD_S]`."""
import json, os, statistics, sys, tempfile, time
WIDTH = int(sys.argv[1]) if len(sys.argv) > 1 else 512
PERIOD_S = float(sys.argv[2]) if len(sys.argv) > 2 else 0.1
import torch
from distlab.rank.events import EventWriter
from distlab.rank.health import HealthSampler, HEALTH_EVERY_S
torch.set_num_threads(1)
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(256, WIDTH), torch.nn.ReLU(), torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(), torch.nn.Linear(WIDTH, 10))
opt = torch.optim.SGD(net.parameters(), lr=0.01)
batches = [(torch.randn(64, 256), torch.randint(0, 10, (64,))) for _ in range(8)]
d = tempfile.mkdtemp()
writer = EventWriter(os.path.join(d, "events", "rank0.jsonl"), 0)

def block(steps: int) -> float:
    t0 = time.perf_counter()
    for i in range(steps):
        x, y = batches[i % len(batches)]
        loss = torch.nn.functional.cross_entropy(net(x), y); opt.zero_grad(); loss.backward(); opt.step()
    return (time.perf_counter() - t0) / steps

step_s = block(20)
steps = max(10, int(0.6 / step_s))  # ~0.6 s blocks: several samples in each sampled block
samples, out = 0, {True: [], False: []}
for i in range(60):
    for on in ((True, False) if i % 2 else (False, True)):
        hs = HealthSampler(writer.emit, every_s=PERIOD_S, environ={}).start() if on else None
        out[on].append(block(steps))
        if hs: hs.stop(); samples += hs.samples
ratios = [(a / b - 1) * 100 for a, b in zip(out[True], out[False])]
q = statistics.quantiles(ratios, n=4)
hs = HealthSampler(writer.emit, environ={})
t0 = time.perf_counter()
for _ in range(300): writer.emit("health", **hs.sample())
per_sample_us = (time.perf_counter() - t0) / 300 * 1e6
print(json.dumps({"width": WIDTH, "step_ms": round(statistics.median(out[False]) * 1e3, 3),
                  "step_ms_sampled": round(statistics.median(out[True]) * 1e3, 3), "period_s": PERIOD_S, "samples": samples,
                  "overhead_pct_at_period": round(q[1], 3), "overhead_pct_iqr": [round(q[0], 2), round(q[2], 2)],
                  "overhead_pct_at_default_1s": round(q[1] * PERIOD_S / HEALTH_EVERY_S, 4),
                  "per_sample_us": round(per_sample_us, 1),
                  "per_sample_share_at_default_1s_pct": round(per_sample_us / 1e6 / HEALTH_EVERY_S * 100, 4)}))
