# %% [markdown]
# # Memory: out of memory, uneven budgets, leaks
# > Run a real out-of-memory on CPU ranks, then each fix with what it cost and what it bought; a mixed 12 GB + 8 GB cluster; a leak that the growth detector names.
#
# Every guide has an "out of memory" section, and they all list the same remedies: smaller micro-batch with
# gradient accumulation, activation checkpointing, mixed precision, FSDP. They rarely say which part of memory each
# remedy cuts, so a person tries them in turn. This notebook makes the failure real and measures each remedy.
#
# - **The limit is real.** Each CPU rank caps its own data segment (`RLIMIT_DATA`, headroom over what the rank holds
#   after `init_process_group`): past it, torch's own CPU allocator fails with `DefaultCPUAllocator: can't allocate
#   memory`. On a GPU the same rank code caps the CUDA allocator with `set_per_process_memory_fraction` and gets a real
#   `torch.cuda.OutOfMemoryError` (the `gpu` tests).
# - **The memory is measured.** `MemoryMonitor` writes one `memory` event per step and rank: the step's peak (CPU:
#   resident high-water mark; GPU: `max_memory_allocated`), beside what the tensors hold: parameters, gradients,
#   optimizer state (counted from the tensors that exist, FSDP's local shards only), what else the rank holds after
#   the step (DDP's buckets, buffers), and activations (the step's peak above what it holds after it). The plot shows
#   it per rank, with the budget as a red line.
# - **The ranks run with glibc's `MALLOC_MMAP_THRESHOLD_=131072`** (the scenarios' launch environment): every tensor
#   over 128 KiB gets its own mapping and goes back to the system when freed, so resident memory follows the live
#   tensors instead of the allocator's cache. Without it the figures still tell the same story, with more slack.

# %% tags=["parameters"]
nproc = 2  # ranks per run (the scenarios are sized for 2)
backend = "auto"  # "auto" picks nccl with a GPU per rank, else gloo
block = True  # wait for each run to end (needed for papermill; harmless when you run cells by hand)
scenarios = None  # None: every scenario of the family; or a list of ids to run
results_path = None  # where to write the outcomes as JSON (None: nowhere)
runs_root = None  # where run directories go (None: $DISTLAB_RUNS_ROOT or ./distlab-runs)

# %%
import json
from pathlib import Path
from IPython.display import Image, display, Markdown
from distlab.ui.lab import ScenarioLab
from distlab.ui.plots import fig_png
from distlab.ui.memory_plots import plot_memory, has_memory_events

FAMILY = "memory"
lab = ScenarioLab(family=FAMILY, nproc=nproc, backend=backend, runs_root=runs_root)
wanted = list(lab.scenarios) if scenarios is None else list(scenarios)
unknown = [s for s in wanted if s not in lab.scenarios]
assert not unknown, f"scenarios {unknown} are not in family {FAMILY!r}: pick from {list(lab.scenarios)}"
lab


# %%
def figures_table(o: dict) -> str:
    "The outcome's measured figures as a small markdown table."
    rows = [f"| {k} | {v:.4g} |" if isinstance(v, float) else f"| {k} | {v} |" for k, v in o["figures"].items()]
    return "| figure | value |\n|---|---|\n" + "\n".join(rows)

def step(scenario: str, variant: str):
    "Run one variant through the lab (if selected), show its verdict, figures and memory plot, and save the outcomes so far."
    if scenario not in wanted:
        print(f"{scenario} / {variant}: not selected (see `scenarios`)"); return None
    o = lab.run(variant, scenario=scenario, block=block)
    if o is None: return None  # not blocking: watch it in the widget above
    verdict = ("reproduced" if variant == "broken" else "fix verified") if o["matched"] else "UNEXPECTED: " + "; ".join(o["problems"])
    print(f"{scenario} / {variant}: status {o['status']}, diagnosis {(o['diagnosis'] or {}).get('kind')}, "
          f"{o['duration_s']:.1f} s -> {verdict}")
    if o.get("diagnosis_text"): print(o["diagnosis_text"].split("\n\nWhy:")[0])
    if o["figures"]: display(Markdown(figures_table(o)))
    if has_memory_events(o["run_dir"]):
        culprits = (o["diagnosis"] or {}).get("culprit_ranks") or []
        display(Image(fig_png(plot_memory(o["run_dir"], title=f"{scenario} / {variant}", culprits=culprits))))
    if results_path: Path(results_path).write_text(json.dumps(lab.outcomes, indent=1, default=str))
    return o


# %% [markdown]
# ## 1. Out of memory
#
# **What you notice.** `RuntimeError: CUDA out of memory. Tried to allocate ...` (on CPU ranks: `DefaultCPUAllocator:
# can't allocate memory`) in the first step, on every rank or on one.
#
# **The setup.** A recommender-style model: 8 embedding tables (40 MiB of weights, so 40 of gradients and 80 of
# Adam state), then six narrow Linear+ReLU blocks, trained with DDP on a batch of 16384 samples per rank. Each rank
# may grow by the budget shown on the plot over what it holds after joining the process group.

# %%
o = step("oom", "broken")

# %% [markdown]
# **What distlab shows.** A rank died in its first step; the diagnosis is `rank-died` with the allocator's own
# message, and the known signature names it (out of host memory). No memory event was written: the rank never
# finished a step. The fixes below show what the step needed.

# %%
o = step("oom", "fixed")

# %% [markdown]
# **Fix 1: accumulate.** Four micro-batches of 4096, the first three under `model.no_sync()` (no all-reduce), each
# loss scaled by its share of the batch: the optimizer sees the same gradient as with the whole batch. Only the
# activations shrink, to about a quarter; the step does the same arithmetic in smaller pieces.

# %%
o = step("oom", "fixed-checkpoint")

# %% [markdown]
# **Fix 2: activation checkpointing.** `torch.utils.checkpoint` on segments of two blocks keeps only each segment's
# input and recomputes the rest during backward: the activations fall, and the step pays one more forward pass of
# the blocks.

# %%
o = step("oom", "fixed-bf16")

# %% [markdown]
# **Fix 3: bf16 autocast.** The Linear layers compute in bfloat16 and save bfloat16 activations (half the bytes);
# weights, gradients and Adam's state stay float32. On GPUs with bf16 units it is also faster; **on this CPU it is
# much slower** (no bf16 matrix instructions: ~2 GFLOP/s against ~30 in float32), which the step time shows.

# %%
o = step("oom", "fixed-fsdp")

# %% [markdown]
# **Fix 4: shard the state.** `fully_shard` (FSDP2, on gloo here) on each table, each block and the root: each rank
# keeps half of the parameters, gradients and Adam state, and gathers a table's full weights only while it runs.
# The activations are unchanged; what shrinks is the state, and the step pays the all-gathers and reduce-scatters.

# %%
cmp = [o for o in lab.outcomes if o["scenario"] == "oom" and o["variant"] != "broken"]
if cmp:
    rows = []
    for o in cmp:
        f = {k.split("_", 1)[1]: v for k, v in o["figures"].items() if k.split("_", 1)[1] in
             ("peak_mib", "budget_mib", "params_mib", "grads_mib", "optimizer_mib", "other_mib", "activations_mib", "step_ms")}
        rows.append(f"| {o['variant']} | {f.get('peak_mib')} | {f.get('budget_mib')} | {f.get('params_mib')} + {f.get('grads_mib')} + "
                    f"{f.get('optimizer_mib')} | {f.get('other_mib')} | {f.get('activations_mib')} | {f.get('step_ms')} |")
    display(Markdown("| fix | peak MiB | budget MiB | params + grads + optimizer MiB | other held MiB | activations MiB | step ms |\n|---|---|---|---|---|---|---|\n" + "\n".join(rows)))

# %% [markdown]
# **What each fix cost and bought.** Read the table: accumulation and checkpointing cut activations, bf16 halves the
# saved ones, FSDP cuts the state. When the state is what fills the device (large model, small batch), only sharding
# (or a lighter optimizer) helps; when activations do, the first three do, and accumulation is the cheapest.

# %% [markdown]
# ## 2. One rank runs out first: a 12 GB and an 8 GB card
#
# **What you notice.** `rank 1: CUDA out of memory` while rank 0 is fine (guide 004's cluster: a 12 GB master and
# 8 GB workers). DDP needs every rank to run the same steps, so the smallest card decides.
#
# **The setup.** The same model; rank 0 may grow by 12 units of memory, rank 1 by 8 (on one GPU the `gpu` test does
# this with `set_per_process_memory_fraction`).

# %%
o = step("uneven-memory", "broken")

# %% [markdown]
# **What distlab shows.** Rank 1 died of OOM (the culprit); rank 0 was waiting for it in the all-reduce.

# %%
o = step("uneven-memory", "fixed")

# %% [markdown]
# **What changed.** Before training, every rank ran the guides' 5-step test (`check_memory_budget`): a throwaway
# copy of the model without DDP, a few steps, each rank's peak against its own budget, gathered on every rank. The
# report named rank 1 as the first to fail; rank 1 halved its micro-batch and doubled its accumulation until it fit,
# rank 0 kept its own. Both still contribute the same batch to each step, so DDP's average is unchanged; rank 1 pays
# with a longer step (and, through DDP, so does rank 0).

# %% [markdown]
# ## 3. Memory that grows every step

# %%
o = step("memory-leak", "broken")

# %% [markdown]
# **What distlab shows.** The memory left after each step climbs a few MiB per step; `MemoryGrowthDetector`
# confirms it after six steps and names the cause: tensors that still hold their autograd graph are alive between
# steps. Here it is a running metric on a probe batch, scored in train mode without `torch.no_grad()` and kept as
# a tensor: each one keeps its forward pass's saved activations alive. (Keeping the *training* loss as a tensor
# after its `backward()` leaks far less than the guides suggest: backward frees the saved activations, and what
# remains is the graph's bookkeeping; it is the graphs that never ran backward that hold the memory.)

# %%
o = step("memory-leak", "fixed")

# %% [markdown]
# **What changed.** The probe is scored under `torch.no_grad()` and kept as `.item()`: flat memory, a quiet detector.
#
# ## Your own loop
#
# ```python
# from distlab.rank.memory import MemoryMonitor
# from distlab.train.memory_guards import MemoryGrowthDetector, OOMBackoff, check_memory_budget
# report = check_memory_budget(make_step, budget_bytes=my_budget)   # before training: who fails first, and why
# mem, growth = MemoryMonitor(device, budget_bytes=my_budget), MemoryGrowthDetector(device=device)
# mem.watch(model, opt)
# backoff = OOMBackoff(batch_size=len(x))
# for step, (x, y) in enumerate(loader):
#     opt.zero_grad(set_to_none=True)
#     backoff.step((x, y), lambda xb, yb, scale: (loss_fn(model(xb), yb) * scale).backward(), model)
#     opt.step()
#     growth.observe(step, mem.step_done(step).current_bytes)
# ```

# %%
summary = {(o["scenario"], o["variant"]): o["matched"] for o in lab.outcomes}
print(json.dumps({f"{k[0]}/{k[1]}": v for k, v in summary.items()}, indent=1))
assert all(summary.values()), f"not as expected: {[k for k, v in summary.items() if not v]}"
