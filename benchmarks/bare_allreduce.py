"""A bare all_reduce timing loop under torchrun, written by hand with no distlab: the yardstick for `distlab bench`.

    torchrun --standalone --nproc-per-node 2 benchmarks/bare_allreduce.py --sizes 8,4096,16777216 --iters 20 --warmup 5

Per size: `warmup` calls, a barrier, `iters` timed calls; the time is the mean per call of the slowest rank.
Rank 0 prints one JSON object: {"world_size": n, "rows": [{"size_bytes", "time_s", "busbw_gbps"}]}."""
import argparse, json, time
import torch, torch.distributed as dist

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", required=True, help="comma-separated sizes in bytes (float32 elements: multiples of 4)")
    ap.add_argument("--iters", type=int, default=20); ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args()
    dist.init_process_group("gloo")
    n, rows = dist.get_world_size(), []
    try:
        for size in (int(s) for s in a.sizes.split(",")):
            buf = torch.ones(size // 4, dtype=torch.float32)
            for _ in range(a.warmup): dist.all_reduce(buf)
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(a.iters): dist.all_reduce(buf)
            t = torch.tensor([(time.perf_counter() - t0) / a.iters], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank, as nccl-tests reports
            secs = t.item()
            rows.append({"size_bytes": size, "time_s": secs, "busbw_gbps": size / 1e9 / secs * 2 * (n - 1) / n})
        if dist.get_rank() == 0: print(json.dumps({"world_size": n, "rows": rows}), flush=True)
    finally: dist.destroy_process_group()

if __name__ == "__main__": main()
