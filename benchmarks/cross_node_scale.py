"""The watch across nodes at scale, by simulation: synthetic event streams of 64, 256 and 1024 ranks (8 a node), shaped
from a recorded rank's events (tests/fixtures/recorded/trainer-rank0: rank 0 of a 2-rank job training through
distlab's DDPTrainer, with its step-count check: hello, init, DDP's first collectives, its backward's all-reduce,
step and health events), renumbered and re-timed. Node 0 is a real `CrossNodeWatcher` hub reading its own
ranks' event files; every other node's ranks are `RankTrack`s fed the same streams, sent each look as the launcher
sends them (`node_message` through a `WireEncoder`) and taken by the hub as its server thread takes them (`json.loads`,
`Hub.take`, `WireDecoder`); the clock is simulated, a look every `LOOK_S` (0.2 s), no sockets. Per scale: the hub's
look (`poll` then `advise`, as the launcher calls them), its CPU time (the thread's, which a loaded machine inflates
less than the wall clock) and wall ms, median and p90, and CPU per rank; the hub's decoding of a look's lines (its
server threads' work); bytes per look per node and per rank per second, beside the whole-state message the channel sent before;
then two hangs whose culprit is the last rank, on the last node: a mismatch (it calls the step-count check's
all_gather where the others all-reduce) and a stall (it blocks on a lock in its own code while the others wait in the
all-reduce, a stall once they have waited `stall_after_s`, 3 s): seconds from the hang to node 0's diagnosis, the hub's
look while the others wait, the diagnosing look's ms, and bytes per look per node while the job hangs.
    python benchmarks/cross_node_scale.py [--ranks 64,256,1024] [--per-node 8] [--looks 30] [--step-ms 100]
                                          [--buckets 4] [--faults mismatch,stall] [--profile] [--json OUT]"""
import argparse, cProfile, io, json, os, pstats, statistics, subprocess, sys, tempfile, time
from pathlib import Path
from distlab.watch.analysis import RankTrack
from distlab.watch.cross_node import CrossNodeWatcher, WireEncoder, WireDecoder, node_message, LOOK_S

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "fixtures" / "recorded" / "trainer-rank0" / "rank0.jsonl"  # kept as it was: recordings/ are remade

def template(path: Path = RECORDED) -> dict:
    "The shapes of a recorded rank's events: hello, init, the collectives before its loop, its DDP backward's all-reduce, a step, a health sample."
    evs = [json.loads(l) for l in open(path) if l.strip()]
    first = lambda kind, **kw: next(e for e in evs if e["ev"] == kind and all(e.get(k) == v for k, v in kw.items()))
    starts = [e for e in evs if e["ev"] == "coll" and e["state"] == "started"]
    ddp = next(e for e in starts if e.get("ddp") == "buckets")
    return {"hello": first("hello"), "init": first("init", state="started"), "pre": [e for e in starts if e["t"] < ddp["t"]],
            "ddp": ddp, "step": first("step"), "health": first("health")}

class SynthRank:
    "One rank's events, synthetic: the template's, renumbered and re-timed; a step every `step_s` with `buckets` DDP all-reduces; at step `hang_step` (if any) every rank waits in its first all-reduce for good, `culprit` in the template's all_gather instead (`fault` mismatch) or in no collective (`stall`)."
    def __init__(self, tpl: dict, rank: int, world: int, host: str, pid: int, t0: float, step_s: float, buckets: int,
                 hang_step: int | None = None, culprit: int | None = None, fault: str | None = None):
        self.tpl, self.rank, self.world, self.host, self.pid, self.t0 = tpl, rank, world, host, pid, t0
        self.step_s, self.buckets, self.hang_step, self.culprit, self.fault = step_s, buckets, hang_step, culprit, fault
        self.stuck_t: float | None = None  # when it stopped for good (its CPU goes idle then)
        self._it = self._events(); self._next = next(self._it)

    def until(self, t: float) -> list[dict]:
        "The events stamped up to `t`."
        out = []
        while self._next["t"] <= t: out.append(self._next); self._next = next(self._it)
        return out

    def _coll(self, tpl: dict, seq: int, t: float, dur_s: float | None) -> list[dict]:
        base = {"ev": "coll", "rank": self.rank, "gen": 0, "group": "world", "seq": seq}
        start = {**{k: v for k, v in tpl.items() if k not in ("rank", "gen", "seq", "t")}, **base, "state": "started", "t": t}
        return [start] if dur_s is None else [start, {**base, "state": "completed", "op": tpl["op"], "dur_s": dur_s, "t": t + dur_s}]

    def _timeline(self):
        "(t, event) in the order the rank does things; health samples are merged in by `_events`."
        tpl, r, t = self.tpl, self.rank, self.t0 + (self.rank % 7) * 1e-3  # ranks a few ms apart, as real ones are
        own = {"rank": r, "gen": 0}
        yield {**tpl["hello"], **own, "t": t, "pid": self.pid, "host": self.host, "world_size": self.world, "local_rank": r % 8}
        yield {**tpl["init"], **own, "t": t + 0.01}
        yield {**tpl["init"], **own, "state": "completed", "t": t + 0.05}
        seq, t = 0, t + 0.1
        for c in tpl["pre"]:
            seq += 1; yield from self._coll(c, seq, t, 0.01); t += 0.02
        step = 0
        while True:
            for b in range(self.buckets):
                seq += 1
                tb = t + self.step_s * (0.4 + 0.5 * b / self.buckets)  # backward: buckets ready one after another
                if step == self.hang_step:
                    self.stuck_t = tb
                    if r != self.culprit: yield from self._coll(tpl["ddp"], seq, tb, None)
                    elif self.fault == "mismatch": yield from self._coll(tpl["pre"][-1], seq, tb, None)
                    return  # every rank waits from here on
                yield from self._coll(tpl["ddp"], seq, tb, self.step_s * 0.1 / self.buckets)
            yield {**tpl["step"], **own, "step": step, "t": t + self.step_s * 0.95}
            step, t = step + 1, t + self.step_s

    def _events(self):
        health_t = self.t0 + 1.0
        for e in self._timeline():
            while health_t <= e["t"]: yield {**self.tpl["health"], "rank": self.rank, "gen": 0, "t": health_t}; health_t += 1.0
            yield e
        while True: yield {**self.tpl["health"], "rank": self.rank, "gen": 0, "t": health_t}; health_t += 1.0

class SimNode:
    "Another node's launcher, simulated: its ranks' tracks fed their streams, its look's line as `HubClient` sends it."
    def __init__(self, node: int, ranks: list[SynthRank]):
        self.node, self.host, self.ranks = node, f"node{node}", ranks
        self.stuck_t = {s.rank: s for s in ranks}
        self.tracks = {s.rank: RankTrack(s.rank) for s in ranks}
        self.wire = WireEncoder()

    def look(self, now: float) -> tuple[bytes, int]:
        "Feed the events up to `now`; this look's line, and the length the whole state would have had."
        for s in self.ranks:
            t = self.tracks[s.rank]
            for e in s.until(now): t.feed(e)
        msg = node_message("sim", self.node, self.host, now, self.tracks, cpu=lambda t: _cpu(self.stuck_t[t.rank].stuck_t, now))
        return self.wire.encode(msg), len(json.dumps(msg, default=str)) + 1

def _cpu(stuck_t: float | None, now: float) -> dict:
    "What a node's CPU reading says of a simulated rank: busy while it trains, idle (waiting on a futex) since it stopped for good."
    idle = round(now - stuck_t, 1) if stuck_t is not None and now - stuck_t > 0.5 else 0.0
    return {"idle_s": idle, "syscall": "202" if idle else None}

def _append(run_dir: Path, evs_by_rank: dict[int, list[dict]]) -> None:
    for r, evs in evs_by_rank.items():
        if evs:
            with open(run_dir / "events" / f"rank{r}.jsonl", "a") as f: f.write("".join(json.dumps(e) + "\n" for e in evs))

def simulate(world: int, per_node: int = 8, looks: int = 30, step_s: float = 0.1, buckets: int = 4, fault: str | None = "mismatch",
             hang_looks: int = 40, profile: cProfile.Profile | None = None, tpl: dict | None = None, on_look=None) -> dict:
    "One job of `world` ranks: `looks` looks of training, then (with a `fault`: mismatch, stall) the last rank's hang, looked at until node 0 names it; `on_look(k, hub watcher, other nodes)` after each look."
    tpl = tpl or template()
    nodes_n, warm = world // per_node, 1.0  # the loop starts after init and the first collectives
    culprit = world - 1
    t0 = time.time()
    hang_step = int((warm + looks * LOOK_S) / step_s) + 1 if fault else None
    hang_t = None if hang_step is None else t0 + 0.1 + len(tpl["pre"]) * 0.02 + (hang_step + 0.4) * step_s  # its first all-reduce
    synth = lambda r, pid: SynthRank(tpl, r, world, f"node{r // per_node}", pid, t0, step_s, buckets, hang_step, culprit, fault)
    with tempfile.TemporaryDirectory(prefix="distlab-xn-scale-") as d:
        run_dir = Path(d); (run_dir / "events").mkdir()
        own = [synth(r, os.getpid()) for r in range(per_node)]  # node 0's ranks: alive (this process), in event files
        others = [SimNode(n, [synth(r, 100000 + r) for r in range(n * per_node, (n + 1) * per_node)]) for n in range(1, nodes_n)]
        w = CrossNodeWatcher(run_dir, world, rdzv_endpoint="127.0.0.1:0", job="sim", node=0, stacks=False, local_ranks=per_node,
                             port=_free_port())
        assert w.role == "hub", w.role
        wires = {n.node: WireDecoder() for n in others}
        rows, diag, now, k = [], None, t0 + warm, 0
        try:
            while k < looks + (hang_looks if fault else 0) and diag is None:
                now += LOOK_S; k += 1
                _append(run_dir, {s.rank: s.until(now) for s in own})
                lines = [(n, *n.look(now)) for n in others]
                c = time.thread_time()
                for n, line, _ in lines:
                    w.hub.take(json.loads(line), len(line), "198.18.0.%d" % n.node, wires[n.node], now=now)
                decode_cpu_s = time.thread_time() - c
                if profile is not None: profile.enable()
                t, c = time.perf_counter(), time.thread_time()
                diag = w.poll(now)
                if diag is None: w.advise(now)
                look_s, look_cpu_s = time.perf_counter() - t, time.thread_time() - c
                if profile is not None: profile.disable()
                if on_look is not None: on_look(k, w, others)
                rows.append({"look": k, "hung": hang_t is not None and now >= hang_t,
                             "look_s": look_s, "look_cpu_s": look_cpu_s, "decode_cpu_s": decode_cpu_s,
                             "bytes": [len(l) for _, l, _ in lines], "whole": [b for _, _, b in lines]})
        finally:
            for n in w.hub.nodes.values(): n["bye"] = True  # no connection to wait for
            w.close()
    return {"world": world, "nodes": nodes_n, "fault": fault, "rows": rows, "diagnosis": diag, "culprit": culprit, "hang_t": hang_t,
            "diag_t": now if diag is not None else None}

def _free_port() -> int:
    import socket
    with socket.socket() as s: s.bind(("127.0.0.1", 0)); return s.getsockname()[1]

def summary(res: dict, per_node: int) -> dict:
    "The figures of a training run (its steady looks, after the first two that carry every rank's whole state), and of its hang."
    steady = [r for r in res["rows"] if not r["hung"]][2:]
    hung = [r for r in res["rows"] if r["hung"]]
    out = {"ranks": res["world"], "nodes": res["nodes"]}
    if len(steady) >= 3:
        ms = sorted(r["look_s"] * 1e3 for r in steady)
        cpu = sorted(r["look_cpu_s"] * 1e3 for r in steady)
        per_node_b = [b for r in steady for b in r["bytes"]]
        whole_b = [b for r in steady for b in r["whole"]]
        out |= {"looks": len(steady), "look_ms_median": statistics.median(ms), "look_ms_p90": ms[int(0.9 * (len(ms) - 1))],
                "look_cpu_ms_median": statistics.median(cpu), "look_cpu_ms_p90": cpu[int(0.9 * (len(cpu) - 1))],
                "look_cpu_us_per_rank": statistics.median(cpu) * 1e3 / res["world"],
                "decode_cpu_ms_median": statistics.median(r["decode_cpu_s"] * 1e3 for r in steady),
                "bytes_per_look_node": statistics.mean(per_node_b), "bytes_per_look_node_max": max(per_node_b),
                "bytes_per_s_rank": statistics.mean(per_node_b) / per_node / LOOK_S,
                "whole_bytes_per_look_node": statistics.mean(whole_b),
                "whole_bytes_per_s_rank": statistics.mean(whole_b) / per_node / LOOK_S}
    f, d = res["fault"], res["diagnosis"]
    if f and len(hung) > 1:
        out[f"{f}_waiting_look_ms"] = statistics.median(r["look_s"] * 1e3 for r in hung[:-1])
        out[f"{f}_waiting_look_cpu_ms"] = statistics.median(r["look_cpu_s"] * 1e3 for r in hung[:-1])
        out[f"{f}_hung_bytes_per_look_node"] = statistics.mean(b for r in hung[1:] for b in r["bytes"])
    if f and d is not None:
        out |= {f"{f}_diagnosis": d.kind, f"{f}_culprits": d.culprit_ranks, f"{f}_headline": d.headline,
                f"{f}_diagnosis_look_ms": res["rows"][-1]["look_s"] * 1e3, f"{f}_diagnosis_look_cpu_ms": res["rows"][-1]["look_cpu_s"] * 1e3,
                f"{f}_after_s": round(res["diag_t"] - res["hang_t"], 2)}
    return out

def _table(rows: list[dict], cols: list[tuple]) -> str:
    head = "| " + " | ".join(c for c, _, _ in cols) + " |\n|" + "---|" * len(cols) + "\n"
    cell = lambda r, k, f: k(r) if callable(k) else "-" if r.get(k) is None else f.format(r[k])
    return head + "".join("| " + " | ".join(cell(r, k, f) for _, k, f in cols) + " |\n" for r in rows)

TRAINING = [("ranks", "ranks", "{}"), ("nodes", "nodes", "{}"), ("look, CPU ms, median", "look_cpu_ms_median", "{:.1f}"),
            ("p90", "look_cpu_ms_p90", "{:.1f}"), ("CPU us a rank", "look_cpu_us_per_rank", "{:.1f}"),
            ("look, wall ms, median", "look_ms_median", "{:.1f}"), ("p90", "look_ms_p90", "{:.1f}"),
            ("hub decoding, CPU ms a look", "decode_cpu_ms_median", "{:.1f}"), ("B a look a node", "bytes_per_look_node", "{:.0f}"),
            ("max", "bytes_per_look_node_max", "{}"), ("B/s a rank", "bytes_per_s_rank", "{:.0f}"),
            ("whole state, B/s a rank", "whole_bytes_per_s_rank", "{:.0f}"),
            ("ratio", lambda r: f"{r['whole_bytes_per_s_rank'] / r['bytes_per_s_rank']:.0f}x", None)]
HANGS = [("ranks", "ranks", "{}")] + [x for f in ("mismatch", "stall") for x in (
    (f"{f}: diagnosed after s", f"{f}_after_s", "{}"), ("look while waiting, CPU ms", f"{f}_waiting_look_cpu_ms", "{:.1f}"),
    ("diagnosing look, CPU ms", f"{f}_diagnosis_look_cpu_ms", "{:.1f}"), ("B a look a node", f"{f}_hung_bytes_per_look_node", "{:.0f}"))]

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="64,256,1024", help="world sizes to simulate")
    ap.add_argument("--per-node", type=int, default=8, help="ranks per node")
    ap.add_argument("--looks", type=int, default=30, help="looks of training per scale before the hang")
    ap.add_argument("--step-ms", type=float, default=100.0, help="a training step (DDP backward) every this many ms")
    ap.add_argument("--buckets", type=int, default=4, help="DDP buckets (all-reduces) per step")
    ap.add_argument("--faults", default="mismatch,stall", help="hangs to diagnose after training ('': none)")
    ap.add_argument("--profile", action="store_true", help="cProfile the hub's looks at the largest scale, print the top functions")
    ap.add_argument("--json", default=None, help="write the figures here")
    a = ap.parse_args(argv)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"uptime before: {load}", flush=True)
    tpl, rows = template(), []
    sizes, faults = [int(x) for x in a.ranks.split(",") if x], [f for f in a.faults.split(",") if f] or [None]
    prof = cProfile.Profile() if a.profile else None
    for world in sizes:
        row = {}
        for i, fault in enumerate(faults):
            t = time.time()
            res = simulate(world, a.per_node, a.looks if i == 0 else 5, a.step_ms / 1e3, a.buckets, fault, tpl=tpl,
                           profile=prof if world == max(sizes) else None)
            row |= {k: v for k, v in summary(res, a.per_node).items() if i == 0 or k.startswith(f"{fault}_")}
            print(f"{world} ranks, {fault or 'training'} ({time.time() - t:.1f} s)" +
                  (f": look {row['look_cpu_ms_median']:.1f} ms CPU median, {row['bytes_per_s_rank']:.0f} B/s a rank" if i == 0 else "") +
                  (f"; {row[fault + '_diagnosis']} {row[fault + '_culprits']} after {row[fault + '_after_s']} s: {row[fault + '_headline'][:300]}"
                   if fault and row.get(f"{fault}_diagnosis") else ""), flush=True)
        rows.append(row)
    print(f"\nsteps of {a.step_ms:g} ms, {a.buckets} DDP all-reduces each ({a.buckets * 1e3 / a.step_ms:.0f} collectives/s a rank), "
          f"{a.per_node} ranks a node, a look every {LOOK_S} s\n\ntraining:\n")
    print(_table(rows, TRAINING))
    if faults != [None]: print("the last rank hangs:\n\n" + _table(rows, HANGS))
    first, last = rows[0], rows[-1]
    print(f"from {first['ranks']} to {last['ranks']} ranks ({last['ranks'] / first['ranks']:.0f}x): the look's CPU "
          f"{last['look_cpu_ms_median'] / first['look_cpu_ms_median']:.1f}x, bytes a rank a second {last['bytes_per_s_rank'] / first['bytes_per_s_rank']:.2f}x")
    print(f"targets at {last['ranks']} ranks: a look <= 50 ms: CPU {last['look_cpu_ms_median']:.1f} ms median, {last['look_cpu_ms_p90']:.1f} ms p90, "
          f"wall {last['look_ms_median']:.1f} / {last['look_ms_p90']:.1f} ms ({'met' if last['look_cpu_ms_median'] <= 50 else 'NOT met'}); "
          f"<= 1 KB/s a rank: {last['bytes_per_s_rank']:.0f} B/s "
          f"({'met' if last['bytes_per_s_rank'] <= 1024 else 'NOT met'})")
    print(f"uptime after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    if prof is not None:
        out = io.StringIO(); pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25); print(out.getvalue())
    if a.json: Path(a.json).write_text(json.dumps({"args": vars(a), "load": load, "rows": rows}, indent=1, default=str))

if __name__ == "__main__":
    main()
