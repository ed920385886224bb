"""FSDP2 against DDP: per-rank parameter + gradient + optimizer memory, measured side by side in one run.

    python benchmarks/fsdp_memory.py [--nproc 2] [--width 1024] [--layers 8] [--json out.json]

Starts one torchrun job (gloo, CPU ranks). Each rank builds the same MLP twice, once under DDP and once under
`fully_shard` (each layer, then the root), trains 2 steps with Adam on each, and measures after the last step:
- state bytes: the storages of the parameters, gradients and Adam state that exist on the rank (each storage
  once; a DTensor's local shard only), counted by `distlab.rank.memory` from the live tensors;
- held bytes: resident memory after the step minus resident memory before the model was built (DDP's gradient
  buckets and communication buffers included), read from /proc through `MemoryMonitor`.
Target (issue 9): FSDP's state <= DDP's / W + 10 %. Prints one line per rank and the ratio.
"""
import argparse, json, os, subprocess, sys
from pathlib import Path

def rank_main(a):
    import gc, torch, torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from distlab.rank.memory import MemoryMonitor, params_bytes, grads_bytes, optimizer_bytes, MIB
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    def build():
        torch.manual_seed(0)
        return nn.Sequential(*[m for _ in range(a.layers) for m in (nn.Linear(a.width, a.width), nn.ReLU())], nn.Linear(a.width, 10))
    out = {}
    for kind in ("ddp", "fsdp"):
        gc.collect()
        mem = MemoryMonitor("cpu", emit_events=False)
        model = build()
        if kind == "ddp": model = DDP(model)
        else:
            mesh = init_device_mesh("cpu", (world,))
            for layer in model:
                if isinstance(layer, nn.Linear): fully_shard(layer, mesh=mesh)
            fully_shard(model, mesh=mesh)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        mem.watch(model, opt)
        for step in range(2):
            x, y = torch.randn(a.batch, a.width), torch.randint(0, 10, (a.batch,))
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            r = mem.step_done(step)
        out[kind] = {"params": params_bytes(model), "grads": grads_bytes(model), "optimizer": optimizer_bytes(opt),
                     "held": r.current_bytes - r.baseline_bytes, "peak": r.peak_bytes - r.baseline_bytes}
        out[kind]["state"] = out[kind]["params"] + out[kind]["grads"] + out[kind]["optimizer"]
        del model, opt, mem
        dist.barrier()
    print("RANK_JSON " + json.dumps({"rank": rank, "world": world, **out}), flush=True)
    dist.destroy_process_group()

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--json", default=None)
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank: return rank_main(a)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": "131072",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(a.nproc), "--standalone",
                        __file__, "--rank", "--width", str(a.width), "--layers", str(a.layers), "--batch", str(a.batch)],
                       capture_output=True, text=True, timeout=900, env=env)
    rows = [json.loads(l.split("RANK_JSON ", 1)[1]) for l in p.stdout.splitlines() if "RANK_JSON " in l]
    if p.returncode or len(rows) != a.nproc: sys.exit(f"the benchmark job failed (exit {p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    mib = lambda b: round(b / 2**20, 1)
    worst = max(r["fsdp"]["state"] / r["ddp"]["state"] for r in rows)
    target = 1 / a.nproc * 1.10
    for r in sorted(rows, key=lambda r: r["rank"]):
        print(f"rank {r['rank']}: DDP state {mib(r['ddp']['state'])} MiB (held {mib(r['ddp']['held'])}), "
              f"FSDP state {mib(r['fsdp']['state'])} MiB (held {mib(r['fsdp']['held'])}); "
              f"ratio {r['fsdp']['state'] / r['ddp']['state']:.3f}, held ratio {r['fsdp']['held'] / max(r['ddp']['held'], 1):.3f}")
    print(f"FSDP/DDP per-rank params+grads+optimizer: {worst:.3f} (target <= {target:.3f}: {'met' if worst <= target else 'MISSED'})")
    if a.json: Path(a.json).write_text(json.dumps({"rows": rows, "ratio": worst, "target": target}, indent=1))
    return 0 if worst <= target else 1

if __name__ == "__main__": sys.exit(main())
