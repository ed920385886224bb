"""The memory family's GPU budgets, measured on one CUDA GPU: what each lesson script's step needs, then each variant
run as the catalogue runs it, at the shipped budget (and at the one the measurement suggests, where they differ).

    python benchmarks/gpu_memory_budgets.py [--scenarios oom attention-memory] [--json out.json]
    python benchmarks/gpu_memory_budgets.py --backend gloo   # the same passes on a CPU rank (its CPU budget): a dry run

Needs a CUDA GPU (NCCL at world 1). Two passes, side by side in one run:
1. Record only (`DISTLAB_MEMORY_STEPS=1`, no budget): each variant's script under `distlab launch`, one rank. The
   figure that a budget must cover is the caching allocator's peak reservation above what it held after
   `init_process_group` (`data_growth_bytes` of the `memory` events; the budget caps exactly that). The broken
   script fits too, on a card this large, so its full need is seen.
2. The scenario, as `distlab run ID --variant V --nproc 1 --backend nccl` runs it: the shipped GPU budget
   (`DISTLAB_GPU_MEMORY_BUDGET_MIB` in the scenario's launch), each variant against what it expects. Where the
   record-only figures put the shipped budget outside the gap between the fixes and the broken script, the
   suggested budget (the largest fix's need + 10 %, rounded up to 10 MiB) runs too.
Prints one line per run and a JSON summary.
"""
import argparse, json, math, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from distlab.contract import FAST_EXIT_ENV
from distlab.rank.memory_budget import GPU_MEMORY_BUDGET_ENV, MEMORY_STEPS_ENV
from distlab.run.launch import launch
from distlab.scenarios import get_scenario
from distlab.scenarios.memory import memory_events
from distlab.scenarios.runner import run_scenario

MIB = 1 << 20


def record_only(sid: str, variant: str, root: Path, backend: str) -> dict:
    "One rank of the variant's script without a budget: its peak reservation above its start, its peak allocation, step time."
    s = get_scenario(sid)
    t0 = time.perf_counter()
    res = launch(str(s.script_path(variant)), list(s.variant(variant).args), nproc=1, backend=backend, runs_root=root,
                 name=f"{sid}-{variant}-record", env={MEMORY_STEPS_ENV: "1", FAST_EXIT_ENV: "1"}, timeout_s=150).wait()
    evs = memory_events(res.run_dir, 0)
    row = {"scenario": sid, "variant": variant, "status": res.status, "wall_s": round(time.perf_counter() - t0, 1)}
    if evs:
        row.update(reserved_growth_mib=round(max(e.get("data_growth_bytes", 0) for e in evs) / MIB, 1),
                   peak_allocated_mib=round(max(e["peak_bytes"] - e["baseline_bytes"] for e in evs) / MIB, 1),
                   state_mib=round(max(e["params_bytes"] + e["grads_bytes"] + e["optimizer_bytes"] for e in evs) / MIB, 1),
                   step_ms=round(1e3 * sorted(e.get("step_s", 0) for e in evs[1:] or evs)[len(evs[1:] or evs) // 2], 1))
    else: row["failure"] = (res.failure or {}).get("traceback", "")[-400:]
    print(json.dumps(row), flush=True)
    return row


def as_catalogued(sid: str, variant: str, budget: float, root: Path, backend: str) -> dict:
    "The scenario's variant on one GPU rank at `budget` MiB, judged against what it expects."
    s = get_scenario(sid)
    env = {**(s.launch_options.get("env") or {}), GPU_MEMORY_BUDGET_ENV: f"{budget:g}"}
    o = run_scenario(sid, variant, nproc=1, backend=backend, runs_root=root, env=env)
    row = {"scenario": sid, "variant": variant, "gpu_budget_mib": budget, "status": o.status, "matched": o.matched,
           "problems": o.problems, "duration_s": round(o.duration_s or 0, 1),
           "figures": {k: v for k, v in o.figures.items() if isinstance(v, (int, float, str)) or v is None}}
    print(json.dumps(row, default=str), flush=True)
    return row


def suggest(rows: list[dict]) -> float | None:
    "A budget between the fixes and the broken script: the largest fix's reservation + 10 %, up to 10 MiB, if under the broken one's."
    fixes = [r["reserved_growth_mib"] for r in rows if r["variant"] != "broken" and "reserved_growth_mib" in r]
    broken = [r["reserved_growth_mib"] for r in rows if r["variant"] == "broken" and "reserved_growth_mib" in r]
    if not fixes or not broken: return None
    b = math.ceil(max(fixes) * 1.1 / 10) * 10
    return b if b < broken[0] * 0.95 else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", nargs="+", default=["oom", "attention-memory"])
    ap.add_argument("--json", default=None)
    ap.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    ap.add_argument("--passes", nargs="+", default=["record", "catalogue"], choices=["record", "catalogue"], help="which of the two passes to run")
    a = ap.parse_args()
    import torch
    if a.backend == "nccl" and not torch.cuda.is_available(): sys.exit("gpu_memory_budgets.py needs a CUDA GPU (torch.cuda.is_available() is False)")
    root = Path(tempfile.mkdtemp(prefix="gpu-budgets-"))
    out = {"device": torch.cuda.get_device_name(0) if a.backend == "nccl" else "cpu", "torch": torch.__version__, "scenarios": {}}
    for sid in a.scenarios:
        s = get_scenario(sid)
        variants = [v for v, var in s.variants.items() if var.min_nproc <= 1 and (a.backend == "nccl" or not var.needs_gpu)]
        shipped = float((s.launch_options.get("env") or {}).get(GPU_MEMORY_BUDGET_ENV, 0)) or None
        rec = [record_only(sid, v, root, a.backend) for v in variants] if "record" in a.passes else []
        sug = suggest(rec)
        runs = [as_catalogued(sid, v, shipped, root, a.backend) for v in variants] if shipped and "catalogue" in a.passes else []
        if sug and sug != shipped and not all(r["matched"] for r in runs):
            runs += [as_catalogued(sid, v, sug, root, a.backend) for v in variants]
        out["scenarios"][sid] = {"shipped_gpu_budget_mib": shipped, "suggested_gpu_budget_mib": sug, "record_only": rec, "runs": runs}
    print(json.dumps(out, default=str))
    if a.json: Path(a.json).write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
