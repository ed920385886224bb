"""The watch across nodes at scale, by simulation: synthetic event streams of 64, 256 and 1024 ranks (8 a node), shaped
from a recorded rank's events (recordings/init-port-taken/fixed: hello, init, DDP's first collectives, its backward's
all-reduce, step and health events), renumbered and re-timed. Node 0 is a real `CrossNodeWatcher` hub reading its own
ranks' event files; every other node's ranks are `RankTrack`s fed the same streams, sent each look as the launcher
sends them (`node_message` through a `WireEncoder`) and taken by the hub as its server thread takes them (`json.loads`,
`Hub.take`, `WireDecoder`); the clock is simulated, a look every `LOOK_S` (0.2 s), no sockets. Per scale: the hub's
look (`poll` then `advise`, as the launcher calls them) in ms, median and p90, and per rank; the hub's decoding of a
look's lines; bytes per look per node and per rank per second, beside the whole-state message the channel sent before;
then a mismatch on the last node (its last rank calls the step-count check's all_gather where the others all-reduce):
how many looks until node 0 names it, that look's ms, and bytes per look per node while the job hangs.
    python benchmarks/cross_node_scale.py [--ranks 64,256,1024] [--per-node 8] [--looks 30] [--step-ms 100]
                                          [--buckets 4] [--profile] [--json OUT]"""
import argparse, cProfile, io, json, os, pstats, statistics, subprocess, sys, tempfile, time
from pathlib import Path
from distlab.watch.analysis import RankTrack
from distlab.watch.cross_node import CrossNodeWatcher, WireEncoder, WireDecoder, node_message, LOOK_S

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "recordings" / "init-port-taken" / "fixed" / "events" / "rank0.jsonl"

def template(path: Path = RECORDED) -> dict:
    "The shapes of a recorded rank's events: hello, init, the collectives before its loop, its DDP backward's all-reduce, a step, a health sample."
    evs = [json.loads(l) for l in open(path) if l.strip()]
    first = lambda kind, **kw: next(e for e in evs if e["ev"] == kind and all(e.get(k) == v for k, v in kw.items()))
    starts = [e for e in evs if e["ev"] == "coll" and e["state"] == "started"]
    ddp = next(e for e in starts if e.get("ddp") == "buckets")
    return {"hello": first("hello"), "init": first("init", state="started"), "pre": [e for e in starts if e["t"] < ddp["t"]],
            "ddp": ddp, "step": first("step"), "health": first("health")}

class SynthRank:
    "One rank's events, synthetic: the template's, renumbered and re-timed; a step every `step_s` with `buckets` DDP all-reduces; optionally, at step `mismatch_step`, every rank hangs in its first all-reduce, `culprit` in the template's all_gather instead."
    def __init__(self, tpl: dict, rank: int, world: int, host: str, pid: int, t0: float, step_s: float, buckets: int,
                 mismatch_step: int | None = None, culprit: int | None = None):
        self.tpl, self.rank, self.world, self.host, self.pid, self.t0 = tpl, rank, world, host, pid, t0
        self.step_s, self.buckets, self.mismatch_step, self.culprit = step_s, buckets, mismatch_step, culprit
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
                if step == self.mismatch_step:
                    yield from self._coll(tpl["pre"][-1] if r == self.culprit else tpl["ddp"], seq, tb, None)
                    return  # every rank waits in collective `seq` from here on
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
        self.tracks = {s.rank: RankTrack(s.rank) for s in ranks}
        self.wire = WireEncoder()

    def look(self, now: float) -> tuple[bytes, int]:
        "Feed the events up to `now`; this look's line, and the length the whole state would have had."
        for s in self.ranks:
            t = self.tracks[s.rank]
            for e in s.until(now): t.feed(e)
        msg = node_message("sim", self.node, self.host, now, self.tracks, cpu=lambda t: _cpu(t, now))
        return self.wire.encode(msg), len(json.dumps(msg, default=str)) + 1

def _cpu(t: RankTrack, now: float) -> dict:
    "What a node's CPU reading says of a simulated rank: busy while it trains, idle since it entered a collective that never ends."
    cur = t.current()
    idle = round(now - cur["t0"], 1) if cur is not None and now - cur["t0"] > 0.5 else 0.0
    return {"idle_s": idle, "syscall": "202" if idle else None}

def _append(run_dir: Path, evs_by_rank: dict[int, list[dict]]) -> None:
    for r, evs in evs_by_rank.items():
        if evs:
            with open(run_dir / "events" / f"rank{r}.jsonl", "a") as f: f.write("".join(json.dumps(e) + "\n" for e in evs))

def simulate(world: int, per_node: int = 8, looks: int = 30, step_s: float = 0.1, buckets: int = 4, mismatch: bool = True,
             hang_looks: int = 25, profile: cProfile.Profile | None = None, tpl: dict | None = None, on_look=None) -> dict:
    "One job of `world` ranks: `looks` looks of training, then (with `mismatch`) the culprit's all_gather, looked at until node 0 names it; `on_look(k, hub watcher, other nodes)` after each look."
    tpl = tpl or template()
    nodes_n, warm = world // per_node, 1.0  # the loop starts after init and the first collectives
    culprit = world - 1
    t0 = time.time()
    mm_step = int((warm + looks * LOOK_S) / step_s) + 1 if mismatch else None
    mm_t = None if mm_step is None else t0 + 0.1 + len(tpl["pre"]) * 0.02 + (mm_step + 0.4) * step_s  # its first all-reduce
    synth = lambda r, pid: SynthRank(tpl, r, world, f"node{r // per_node}", pid, t0, step_s, buckets, mm_step, culprit)
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
            while k < looks + (hang_looks if mismatch else 0) and diag is None:
                now += LOOK_S; k += 1
                _append(run_dir, {s.rank: s.until(now) for s in own})
                lines = [(n, *n.look(now)) for n in others]
                t = time.perf_counter()
                for n, line, _ in lines:
                    w.hub.take(json.loads(line), len(line), "198.18.0.%d" % n.node, wires[n.node], now=now)
                decode_s = time.perf_counter() - t
                if profile is not None: profile.enable()
                t = time.perf_counter()
                diag = w.poll(now)
                if diag is None: w.advise(now)
                look_s = time.perf_counter() - t
                if profile is not None: profile.disable()
                if on_look is not None: on_look(k, w, others)
                rows.append({"look": k, "hung": mm_t is not None and now >= mm_t,
                             "look_s": look_s, "decode_s": decode_s,
                             "bytes": [len(l) for _, l, _ in lines], "whole": [b for _, _, b in lines]})
        finally:
            for n in w.hub.nodes.values(): n["bye"] = True  # no connection to wait for
            w.close()
    return {"world": world, "nodes": nodes_n, "rows": rows, "diagnosis": diag, "culprit": culprit, "mm_t": mm_t,
            "diag_t": now if diag is not None else None}

def _free_port() -> int:
    import socket
    with socket.socket() as s: s.bind(("127.0.0.1", 0)); return s.getsockname()[1]

def summary(res: dict, per_node: int) -> dict:
    "The figures of one scale: steady looks (after the first two, which carry every rank's whole state), and the hang."
    steady = [r for r in res["rows"] if not r["hung"]][2:]
    hung = [r for r in res["rows"] if r["hung"]]
    ms = sorted(r["look_s"] * 1e3 for r in steady)
    per_node_b = [b for r in steady for b in r["bytes"]]
    whole_b = [b for r in steady for b in r["whole"]]
    d = res["diagnosis"]
    out = {"ranks": res["world"], "nodes": res["nodes"], "looks": len(steady),
           "look_ms_median": statistics.median(ms), "look_ms_p90": ms[int(0.9 * (len(ms) - 1))],
           "look_us_per_rank": statistics.median(ms) * 1e3 / res["world"],
           "decode_ms_median": statistics.median(r["decode_s"] * 1e3 for r in steady),
           "bytes_per_look_node": statistics.mean(per_node_b), "bytes_per_look_node_max": max(per_node_b),
           "bytes_per_s_rank": statistics.mean(per_node_b) / per_node / LOOK_S,
           "whole_bytes_per_look_node": statistics.mean(whole_b),
           "whole_bytes_per_s_rank": statistics.mean(whole_b) / per_node / LOOK_S}
    if hung:
        out["hung_bytes_per_look_node"] = statistics.mean(b for r in hung[2:] or hung for b in r["bytes"])
    if d is not None:
        out |= {"diagnosis": d.kind, "culprits": d.culprit_ranks, "headline": d.headline,
                "diagnosis_look_ms": res["rows"][-1]["look_s"] * 1e3,
                "diagnosed_after_s": round(res["diag_t"] - res["mm_t"], 2)}
    return out

def _table(rows: list[dict]) -> str:
    cols = [("ranks", "ranks", "{}"), ("nodes", "nodes", "{}"), ("look ms (median)", "look_ms_median", "{:.1f}"),
            ("look ms (p90)", "look_ms_p90", "{:.1f}"), ("us/rank", "look_us_per_rank", "{:.1f}"),
            ("decode ms/look", "decode_ms_median", "{:.1f}"), ("B/look/node", "bytes_per_look_node", "{:.0f}"),
            ("max", "bytes_per_look_node_max", "{}"), ("B/s/rank", "bytes_per_s_rank", "{:.0f}"),
            ("before: B/s/rank", "whole_bytes_per_s_rank", "{:.0f}"), ("ratio", None, None),
            ("hung B/look/node", "hung_bytes_per_look_node", "{:.0f}"), ("diagnosis", "diagnosis", "{}"),
            ("after s", "diagnosed_after_s", "{}"), ("its look ms", "diagnosis_look_ms", "{:.1f}")]
    head = "| " + " | ".join(c for c, _, _ in cols) + " |\n|" + "---|" * len(cols) + "\n"
    def cell(r, k, f):
        if k is None: return f"{r['whole_bytes_per_s_rank'] / r['bytes_per_s_rank']:.1f}x"
        return "-" if r.get(k) is None else f.format(r[k])
    return head + "".join("| " + " | ".join(cell(r, k, f) for _, k, f in cols) + " |\n" for r in rows)

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="64,256,1024", help="world sizes to simulate")
    ap.add_argument("--per-node", type=int, default=8, help="ranks per node")
    ap.add_argument("--looks", type=int, default=30, help="looks of training per scale before the mismatch")
    ap.add_argument("--step-ms", type=float, default=100.0, help="a training step (DDP backward) every this many ms")
    ap.add_argument("--buckets", type=int, default=4, help="DDP buckets (all-reduces) per step")
    ap.add_argument("--no-mismatch", action="store_true", help="training only")
    ap.add_argument("--profile", action="store_true", help="cProfile the looks of the largest scale, print the top functions")
    ap.add_argument("--json", default=None, help="write the figures here")
    a = ap.parse_args(argv)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"uptime before: {load}", flush=True)
    tpl, rows = template(), []
    sizes = [int(x) for x in a.ranks.split(",") if x]
    prof = None
    for world in sizes:
        prof = cProfile.Profile() if a.profile and world == max(sizes) else None
        t = time.time()
        res = simulate(world, a.per_node, a.looks, a.step_ms / 1e3, a.buckets, not a.no_mismatch, profile=prof, tpl=tpl)
        rows.append(s := summary(res, a.per_node))
        print(f"{world} ranks ({time.time() - t:.1f} s): look {s['look_ms_median']:.1f} ms median, {s['bytes_per_s_rank']:.0f} B/s per rank"
              + (f"; {s['diagnosis']} {s['culprits']} after {s['diagnosed_after_s']} s: {s['headline']}" if s.get("diagnosis") else ""), flush=True)
    print(f"\nsteps of {a.step_ms:g} ms, {a.buckets} DDP all-reduces each ({a.buckets * 1e3 / a.step_ms:.0f} collectives/s per rank), "
          f"{a.per_node} ranks a node, a look every {LOOK_S} s\n")
    print(_table(rows))
    first, last = rows[0], rows[-1]
    print(f"from {first['ranks']} to {last['ranks']} ranks ({last['ranks'] / first['ranks']:.0f}x): look time "
          f"{last['look_ms_median'] / first['look_ms_median']:.1f}x, bytes per rank per second "
          f"{last['bytes_per_s_rank'] / first['bytes_per_s_rank']:.2f}x")
    print(f"targets at {last['ranks']} ranks: look <= 50 ms: {last['look_ms_median']:.1f} ms "
          f"({'met' if last['look_ms_median'] <= 50 else 'NOT met'}); <= 1 KB/s per rank: {last['bytes_per_s_rank']:.0f} B/s "
          f"({'met' if last['bytes_per_s_rank'] <= 1024 else 'NOT met'})")
    print(f"uptime after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    if prof is not None:
        s = io.StringIO(); pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(30); print(s.getvalue())
    if a.json: Path(a.json).write_text(json.dumps({"args": vars(a), "load": load, "rows": rows}, indent=1, default=str))

if __name__ == "__main__":
    main()
