# %% [markdown]
# ## Watching a run while it trains: health, the dashboard, Prometheus
#
# The doctor looks before the run; this section watches during it. Every rank started by distlab samples its own
# health once a second into its event stream (a `health` event: resident memory, CPU, threads, and on a GPU rank
# the GPU's utilisation, memory, temperature, power and throttle reasons through NVML). Together with the
# `step` events of `StepProfiler` that gives, per rank: step time, throughput, where the step goes (data wait,
# compute, communication wait), memory and health. Two views read them from the run directory as it grows:
#
# - **the dashboard** (`distlab.ui.dashboard.Dashboard`): one table, one row per rank, refreshed every second,
#   the rank the others wait for in red (the straggler rule's figures); it is also a panel of every `RunMonitor`
#   the lab shows;
# - **the Prometheus exporter** (`distlab.health.exporter`, `distlab export RUN_DIR` or `distlab launch --export`):
#   the same figures as metrics labelled `run` and `rank`, for the Prometheus and Grafana a cluster already has.
#
# The run here is a user's own script, not a scenario: a small DDP model whose loop is timed by `StepProfiler`,
# with the last rank made three times slower per step (as a throttled GPU would be).

# %%
import json, time, textwrap, urllib.request
from pathlib import Path
from IPython.display import display
from distlab.run.launch import launch
from distlab.ui.dashboard import Dashboard
from distlab.health.exporter import Exporter

TRAIN_SCRIPT = textwrap.dedent('''
    """A user's DDP training loop, timed per step by distlab's StepProfiler; the last rank is 3x slower per step."""
    import os, sys, time
    import torch, torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    from distlab.rank.profile import StepProfiler

    steps, step_s = int(sys.argv[1]), float(sys.argv[2])
    backend = os.environ.get("DISTLAB_BACKEND", "gloo")  # what `launch` resolved `backend="auto"` to
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda": torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    prof = StepProfiler(model)
    batches = ((torch.randn(32, 64), torch.randint(0, 8, (32,))) for _ in range(steps))
    for x, y in prof.data(batches):
        x, y = x.to(device), y.to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        time.sleep(step_s * (3 if world > 1 and rank == world - 1 else 1))  # the rest of a real model's compute
        opt.zero_grad(); loss.backward(); opt.step()
        prof.step_done(loss=round(loss.item(), 4), samples=len(x))
    prof.close()
    dist.destroy_process_group()
''')
train_script = Path(runs_root or "distlab-runs") / "monitored_train.py"
train_script.parent.mkdir(parents=True, exist_ok=True)
train_script.write_text(TRAIN_SCRIPT)

# %% [markdown]
# Launch it, show the dashboard, and serve its metrics. `port=0` takes any free port (a fixed one is what a
# Prometheus config names: `distlab launch --export 9464 train.py`); `addr` stays 127.0.0.1, so only this machine
# can scrape it: pass `addr="0.0.0.0"` (or `--export-addr`) to let a Prometheus server elsewhere in.

# %%
MONITOR_STEPS, STEP_S = 30, 0.04
mon_run = launch(train_script, [MONITOR_STEPS, STEP_S], nproc=nproc, backend=backend, runs_root=runs_root, name="monitored")
dashboard = Dashboard(mon_run)
exporter = Exporter(mon_run.run_dir, port=0).start()
print(f"run {mon_run.run_id}: metrics at {exporter.url}")
display(dashboard)

# %% [markdown]
# While it trains, read a metric back the way Prometheus does: an HTTP GET of `/metrics`, Prometheus' text
# format, one sample per rank. (A person would rather ask Prometheus itself, e.g.
# `rate(distlab_rank_samples_total[1m])` for each rank's throughput.)

# %%
def scrape(url: str) -> dict[str, dict[str, float]]:
    "metric name -> {rank: value} from one scrape of the exporter (metrics labelled by rank only)."
    out: dict = {}
    for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():
        if line.startswith("distlab_rank_") and 'rank="' in line:
            name, rest = line.split("{", 1)
            labels, value = rest.rsplit("} ", 1)
            rank = labels.split('rank="', 1)[1].split('"', 1)[0]
            if "state=" not in labels and "reason=" not in labels: out.setdefault(name, {})[rank] = float(value)
    return out

mon_deadline = time.time() + 300
while time.time() < mon_deadline and not mon_run.done:
    mon_live = scrape(exporter.url).get("distlab_rank_steps_total", {})
    if len(mon_live) == nproc and min(mon_live.values()) > 0: break
    time.sleep(0.5)
print("steps so far, per rank:", mon_live)

# %% [markdown]
# Wait for the end (a notebook run by papermill must: output a thread writes after the last cell is lost), then
# compare what the exporter says with what the run says.

# %%
mon_result = mon_run.wait()
mon_figs = dashboard.update()
mon_final = scrape(exporter.url)
exporter.stop(); dashboard.close()
print(mon_result.status, "steps per rank:", mon_result.steps_per_rank)
print("exporter's steps:", mon_final["distlab_rank_steps_total"])
print("exporter's step time (ms):", {r: round(v * 1e3, 1) for r, v in mon_final["distlab_rank_step_seconds"].items()})
print("exporter's resident memory (MiB):", {r: round(v / 2**20) for r, v in mon_final["distlab_rank_resident_memory_bytes"].items()})
print("slow ranks:", mon_figs.slow_ranks)
assert mon_result.status == "ok", mon_result
assert mon_final["distlab_rank_steps_total"] == {str(r): float(n) for r, n in mon_result.steps_per_rank.items()}
assert all(v > 0 for v in mon_final["distlab_rank_resident_memory_bytes"].values())  # the health sampler's figure
if nproc > 1: assert mon_figs.slow_ranks == [nproc - 1], mon_figs.to_dict()  # the rank we slowed down, named
display(dashboard)

# %% [markdown]
# **Into Prometheus and Grafana.** On each node, launch with `distlab launch --export 9464 train.py` (or serve a
# run directory with `distlab export RUN_DIR --port 9464`), bind it where your Prometheus can reach it
# (`--export-addr 0.0.0.0` on a trusted network: the endpoint has no authentication), and add the node to
# `prometheus.yml`:
#
# ```yaml
# scrape_configs:
#   - job_name: distlab
#     scrape_interval: 5s
#     static_configs:
#       - targets: ['node0:9464', 'node1:9464']
# ```
#
# Useful queries for a Grafana panel: `distlab_rank_step_seconds` (per rank; a rank above the others is the
# straggler), `rate(distlab_rank_samples_total[1m])` (throughput), `distlab_rank_comm_wait_seconds`
# (communication the rank waited for), `distlab_rank_resident_memory_bytes` and `distlab_rank_gpu_memory_used_bytes`
# (growth is a leak), `distlab_rank_gpu_temperature_celsius` and `distlab_rank_gpu_throttled` (a hot or
# power-capped GPU), and `distlab_rank_straggler == 1` for an alert.
