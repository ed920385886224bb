"""What each piece of the watch's per-step path costs the host, timed alone (no profiler): the CUDA events the ledger
records around a DDP backward on NCCL, the tape append, the event line the writer thread formats later, and the
frame walk that finds the user's line. Complements benchmarks/ledger_inproc.py (the whole step, watched against
unwatched) and benchmarks/watch_profile.py (cProfile, which inflates small calls).

    python benchmarks/watch_parts.py [--device cuda] [--calls 20000]

Prints one JSON object: microseconds per call of each piece (median of 5 batches)."""
import argparse, json, os, statistics, sys, tempfile, time
ap = argparse.ArgumentParser(); ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
ap.add_argument("--calls", type=int, default=20000)
a = ap.parse_args(); CUDA, N = a.device == "cuda", a.calls
d = tempfile.mkdtemp(); os.environ.update(DISTLAB_RUN_DIR=d, RANK="0")
import torch
from distlab.rank import ledger
from distlab.rank.tape import coll_line, coll_head

def us(fn, n=N) -> float:
    "Median over 5 batches of the microseconds one call of `fn` takes."
    per = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n): fn()
        per.append((time.perf_counter() - t0) / n * 1e6)
    return round(statistics.median(per), 3)

out = {"device": torch.cuda.get_device_name(0) if CUDA else "cpu", "torch": torch.__version__}
w = ledger.coll_writer()
tail = w.tape.tail_id(b', "group": "world", "op": "all_reduce"')
out["tape_append_us"] = us(lambda: w.tape.append(1, time.time(), 1, 0.001, tail), 2000)  # a ring of 65536: stay well inside
w.tape.flush()
head, tb = coll_head(0, 0), w.tape.tails[tail]
out["coll_line_format_us"] = us(lambda: coll_line(head, tb, time.time(), 7, 0.001, 1))
out["time_time_and_perf_counter_us"] = us(lambda: (time.time(), time.perf_counter()))
def deep(k):  # the frame walk from a few frames down, as in a backward called through torch
    if k: return deep(k - 1)
    return ledger._user_frame(0)
out["user_frame_walk_depth3_us"] = us(lambda: deep(3))
if CUDA:
    torch.cuda.set_device(0)
    s = torch.cuda.current_stream()
    out["event_create_timing_us"] = us(lambda: torch.cuda.Event(enable_timing=True))
    out["event_create_bare_us"] = us(lambda: torch.cuda.Event())
    out["current_stream_cached_us"] = us(lambda: ledger._current_stream())
    out["torch_current_stream_us"] = us(lambda: torch.cuda.current_stream())
    e_t, e_b = torch.cuda.Event(enable_timing=True), torch.cuda.Event()
    out["record_timing_event_us"] = us(lambda: e_t.record(s))
    out["record_bare_event_us"] = us(lambda: e_b.record(s))
    out["gpu_event_timing_new_us"] = us(lambda: ledger._gpu_event(), 5000)  # what every backward paid before sampling, twice
    torch.cuda.synchronize()
    out["query_passed_event_us"] = us(lambda: e_b.query())
    a1, b1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a1.record(s); b1.record(s); torch.cuda.synchronize()
    out["elapsed_time_us"] = us(lambda: a1.elapsed_time(b1))
    ledger.LEDGER.gpu_side = True
    def mark_and_poll():
        ledger._gpu_mark("world", 1, "all_reduce", 0.001)
    out["gpu_mark_pooled_us"] = us(lambda: (mark_and_poll(), ledger.poll_gpu()) if False else mark_and_poll(), 2000)
    torch.cuda.synchronize(); t0 = time.perf_counter(); n = ledger.poll_gpu(); out["poll_gpu_per_bare_event_us"] = round((time.perf_counter() - t0) / max(n, 1) * 1e6, 3)
    out["marks_pooled_after_poll"] = len(ledger._MARKS)
print(json.dumps(out))
