"""NCCL, one GPU: a collective queued behind a kernel that keeps the GPU busy far past the process group's timeout, so
NCCL's watchdog times it out (the real log line of a rank whose peer never arrives, produced without a peer)."""
import datetime, os
import torch, torch.distributed as dist

def cycles_for(seconds: float) -> int:
    "Cycles of `torch.cuda._sleep` that keep the stream busy about `seconds` on this GPU."
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); torch.cuda._sleep(50_000_000); b.record(); b.synchronize()
    return int(50_000_000 * seconds / (a.elapsed_time(b) / 1e3))

def main():
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=5))
    t = torch.ones(1024, device="cuda")
    for step in range(3):
        dist.all_reduce(t); torch.cuda.synchronize()
        print(f"step {step} loss {1.0 / (step + 1):.4f}", flush=True)
    torch.cuda._sleep(cycles_for(40.0))  # the GPU is busy for 40 s: the next all_reduce cannot finish within 5 s
    dist.all_reduce(t)
    torch.cuda.synchronize()
    print("not reached: the watchdog aborts the process first", flush=True)

if __name__ == "__main__": main()
