"""Measures the live collective watch: the ledger's cost per collective and per DDP step (in one process,
recorded and pass-through calls interleaved), the step time of a 2-rank DDP loop bare vs under the shim
(torchrun, alternating), and the time from a rank's divergence to the watcher's diagnosis at world size 4.

    .venv/bin/python benchmarks/bench_watch.py [--steps 400] [--rounds 3]
"""
import argparse, json, os, socket, statistics, subprocess, sys, tempfile, time, uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from distlab.reaper import kill_run
from distlab.watcher import Watcher
from distlab.events import read_events


def free_port():
    with socket.socket() as s: s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def torchrun(script, args, nproc, run_dir, shim):
    run_id = f"bench-watch-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "DISTLAB_RUN_DIR": str(run_dir), "DISTLAB_RUN_ID": run_id, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(REPO)}
    if not shim: env.pop("DISTLAB_RUN_DIR")
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{free_port()}"] + (["-m", "distlab.shim"] if shim else []) + [str(script), *args]
    return run_id, subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True)


def overhead(steps, rounds):
    "Median step time of the same DDP loop, bare and under the shim, alternating."
    res = {"bare": [], "shim": []}
    for _ in range(rounds):
        for mode in ("bare", "shim"):
            d = Path(tempfile.mkdtemp()); out = d / "times.json"
            run_id, p = torchrun(REPO / "benchmarks" / "watch_ddp_loop.py", [str(steps), str(out)], 2, d, mode == "shim")
            p.wait(timeout=600); kill_run(run_id)
            times = json.loads(out.read_text())[20:]  # skip warm-up
            res[mode].append(statistics.median(times))
    bare, shim = min(res["bare"]), min(res["shim"])  # min over rounds: the least disturbed by other load
    return {"step_ms_bare": round(bare * 1e3, 3), "step_ms_shim": round(shim * 1e3, 3),
            "overhead_pct": round((shim / bare - 1) * 100, 2),
            "rounds_ms": {k: [round(v * 1e3, 3) for v in vs] for k, vs in res.items()}}


def latency(script, nproc):
    "Seconds from the moment ranks diverge to the watcher's diagnosis, with the launcher's 0.2 s poll."
    d = Path(tempfile.mkdtemp())
    run_id, p = torchrun(REPO / "tests" / "scripts" / script, [], nproc, d, True)
    w = Watcher(d, nproc)
    try:
        diag, end = None, time.time() + 120
        while diag is None and time.time() < end and p.poll() is None:
            diag = w.poll(); time.sleep(0.2)
        t_diag = time.time()
    finally:
        p.terminate(); kill_run(run_id, term_grace_s=0.5); p.wait()
    evs = {r: read_events(d, r) for r in range(nproc)}
    seq, group = diag.collective.get("seq"), diag.collective.get("group", "world")
    started = [e["t"] for es in evs.values() for e in es
               if e["ev"] == "coll" and e["state"] == "started" and e["seq"] == seq and e["group"] == group]
    if diag.kind == "mismatch": t_div = max(started)  # both sides have issued it: the mismatch exists
    else: t_div = min(started)  # the first rank starts waiting for the one that never comes
    return {"script": script, "world": nproc, "kind": diag.kind, "culprits": diag.culprit_ranks,
            "diverge_to_diagnosis_s": round(t_diag - t_div, 2), "stall_after_s": w.stall_after_s}


INPROC = r"""
import os, sys, json, tempfile, time, statistics
d = tempfile.mkdtemp(); os.environ.update(DISTLAB_RUN_DIR=d, RANK="0")
import torch, torch.distributed as dist
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=f"file://{d}/store", world_size=1, rank=0)
from distlab import ledger
ledger.install()
tl = ledger.LEDGER.tl
t = torch.ones(1)
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
    torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)))
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
def colls(n=500):
    t0 = time.perf_counter()
    for _ in range(n): dist.all_reduce(t)
    return (time.perf_counter() - t0) / n
def steps(n=20):
    t0 = time.perf_counter()
    for _ in range(n):
        loss = torch.nn.functional.cross_entropy(model(x), y); model.zero_grad(); loss.backward()
    return (time.perf_counter() - t0) / n
res = {k: [] for k in ("coll_pass", "coll_rec", "step_pass", "step_rec")}
for _ in range(30):
    for depth, tag in ((1, "pass"), (0, "rec")):
        tl.depth = depth; res["coll_" + tag].append(colls())
for _ in range(1500):  # single steps, alternating: load from other processes hits both alike
    for depth, tag in ((1, "pass"), (0, "rec")):
        tl.depth = depth; res["step_" + tag].append(steps(1))
tl.depth = 0
m = {k: min(v) for k, v in res.items() if k.startswith("coll")}  # min over rounds: least disturbed by other load
m.update({k: statistics.median(v[100:]) for k, v in res.items() if k.startswith("step")})
print(json.dumps({"per_collective_us": round((m["coll_rec"] - m["coll_pass"]) * 1e6, 1),
                  "all_reduce_us_pass_through": round(m["coll_pass"] * 1e6, 1),
                  "ddp_step_ms_pass_through": round(m["step_pass"] * 1e3, 3), "ddp_step_ms_recorded": round(m["step_rec"] * 1e3, 3),
                  "ddp_step_overhead_pct": round((m["step_rec"] / m["step_pass"] - 1) * 100, 2)}))
dist.destroy_process_group()
"""


def inproc():
    "The ledger's own cost: recorded vs pass-through (the wrappers with recording off), interleaved in one process."
    out = subprocess.run([sys.executable, "-c", INPROC], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    ap = argparse.ArgumentParser(); ap.add_argument("--steps", type=int, default=400); ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    results = {"ledger_in_process": inproc(), "ddp_loop_torchrun_world2": overhead(a.steps, a.rounds),
               "latency": [latency("ddp_uneven.py", 4), latency("sleeper.py", 4)]}
    print(json.dumps(results, indent=1))
