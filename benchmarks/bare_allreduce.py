"""A bare all_reduce timing loop under torchrun, written by hand: the yardstick for `distlab bench`.

    torchrun --standalone --nproc-per-node 2 benchmarks/bare_allreduce.py --sizes 8,4096,16777216 [--iters 20] [--warmup 5]
    ... bare_allreduce.py --sizes ... --paired 7    # also distlab's own timing (distlab.rank.bench), in alternating blocks

Per size: `warmup` calls, a barrier, `iters` timed calls; the time is the mean per call of the slowest rank.
Rank 0 prints one JSON object: {"world_size": n, "rows": [{"size_bytes", "time_s", "busbw_gbps"}]}; with `--paired R`,
each row instead holds R bare and R distlab times (`bare_s`, `distlab_s`), measured in turns in the same processes,
each a block of `iters` calls: --iters, or more, enough to last --min-block-s."""
import argparse, json, math, time
import torch, torch.distributed as dist

def bare_time(count: int, iters: int, warmup: int) -> float:
    "Mean seconds per all_reduce of `count` floats on this rank, timed by hand."
    buf = torch.ones(count, dtype=torch.float32)
    for _ in range(warmup): dist.all_reduce(buf)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters): dist.all_reduce(buf)
    return (time.perf_counter() - t0) / iters

def distlab_time(count: int, iters: int, warmup: int) -> float:
    "The same, timed by distlab bench's rank code (its buffers, fill pattern and timing loop)."
    from distlab.rank.bench import op_buffers, time_iters
    run, _, _ = op_buffers("all_reduce", count, dist.get_rank(), dist.get_world_size(), 0, torch.float32)
    return time_iters(run, iters, warmup, dist.barrier, False)

def slowest(seconds: float) -> float:
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank, as nccl-tests reports
    return t.item()

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", required=True, help="comma-separated sizes in bytes (float32 elements: multiples of 4)")
    ap.add_argument("--iters", type=int, default=20); ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--paired", type=int, default=0, help="rounds of bare and distlab timing in turns (0: bare only)")
    ap.add_argument("--min-block-s", type=float, default=0.05, help="with --paired: at least this long a block (more calls per block)")
    a = ap.parse_args()
    dist.init_process_group("gloo")
    n, rows = dist.get_world_size(), []
    try:
        for size in (int(s) for s in a.sizes.split(",")):
            if not a.paired:
                secs = slowest(bare_time(size // 4, a.iters, a.warmup))
                rows.append({"size_bytes": size, "time_s": secs, "busbw_gbps": size / 1e9 / secs * 2 * (n - 1) / n})
                continue
            # blocks of at least --min-block-s: 50 calls of a small all_reduce take ~2 ms, shorter than a scheduler
            # slice on 2 shared cores, and such blocks differ by 0.3-2.8x from one to the next with no change in code
            one = slowest(bare_time(size // 4, a.warmup, 1))
            iters = max(a.iters, math.ceil(a.min_block_s / one))  # the same on every rank: `one` is the slowest rank's
            row = {"size_bytes": size, "iters": iters, "bare_s": [], "distlab_s": []}
            for i in range(a.paired):
                for side in (("bare", "distlab") if i % 2 == 0 else ("distlab", "bare")):
                    f = bare_time if side == "bare" else distlab_time
                    row[f"{side}_s"].append(slowest(f(size // 4, iters, a.warmup)))
            rows.append(row)
        if dist.get_rank() == 0: print(json.dumps({"world_size": n, "rows": rows}), flush=True)
    finally: dist.destroy_process_group()

if __name__ == "__main__": main()
