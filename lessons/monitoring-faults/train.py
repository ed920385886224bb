"""A DDP run whose progress is reported two ways at once: every rank PUSHES its step, loss and step time to a
Prometheus Pushgateway after each step (the way guide 000 reports metrics), and distlab's StepProfiler writes the step
events that `distlab launch --export` serves for Prometheus to PULL. Nothing in it is wrong: in these lessons the faults
are in the monitoring (a scrape config naming the wrong port; a pushed value that outlives its rank), and the same
script runs in the broken and the fixed half.
Run it on 2 ranks:  PUSHGATEWAY=127.0.0.1:9091 distlab launch --nproc-per-node 2 --export 9464 train.py [STEPS] [STEP_S]
"""
import os
import sys
import time

import torch
import torch.distributed as dist
from prometheus_client import CollectorRegistry, Gauge, push_to_gateway
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from distlab.rank.profile import StepProfiler  # its step events are what the exporter's step-time series are made of

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
step_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.05  # the compute of a bigger model, slept
gateway = os.environ.get("PUSHGATEWAY")  # host:port of the Pushgateway; unset: nothing is pushed
backend = "nccl" if torch.cuda.is_available() else "gloo"
dist.init_process_group(backend)
rank = dist.get_rank()
device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if backend == "nccl" else torch.device("cpu")
if backend == "nccl": torch.cuda.set_device(device)

registry = CollectorRegistry()  # this rank's own metrics, pushed as one group
last_step = Gauge("train_step", "The last step this rank finished", registry=registry)
last_loss = Gauge("train_loss", "The loss of that step", registry=registry)
last_time = Gauge("train_step_seconds", "The time that step took", registry=registry)

torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8)).to(device))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
prof = StepProfiler(model)
gen = torch.Generator().manual_seed(rank)
batches = ((torch.randn(32, 64, generator=gen), torch.randint(0, 8, (32,), generator=gen)) for _ in range(steps))
started = time.perf_counter()
for step, (x, y) in enumerate(prof.data(batches)):
    x, y = x.to(device), y.to(device)
    loss = nn.functional.cross_entropy(model(x), y)
    time.sleep(step_s)
    opt.zero_grad()
    loss.backward()
    opt.step()
    prof.step_done(loss=round(loss.item(), 4), samples=len(x))
    ended = time.perf_counter()
    if gateway:
        last_step.set(step); last_loss.set(loss.item()); last_time.set(ended - started)
        # one group per rank (the grouping key): a push replaces its whole group, so without `rank` in the key
        # each rank's push would overwrite the other's
        push_to_gateway(gateway, job="train", grouping_key={"rank": str(rank)}, registry=registry, timeout=5)
    started = ended
prof.close()
print(f"rank {rank}: {steps} steps", flush=True)
dist.destroy_process_group()
