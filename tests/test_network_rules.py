"""The network rules (`distlab.watch.network_rules`) where they run: in the hub of a watch across nodes, over one node's
ranks read from its event files and another node's ranks as its looks bring them (the wire format, no sockets, no
ranks). DDP's first broadcast that never reaches node 1 is a `network-stall` naming the call, its size and node 1's
rank; a lossy link's all-reduces, uneven after every rank arrived, an advisory `slow-network` at the end of the run."""
import json, os, socket, time
from pathlib import Path
from distlab.contract import events_path
from distlab.watch.analysis import RankTrack
from distlab.watch.cross_node import CrossNodeWatcher, WireEncoder, WireDecoder, node_message

B = time.time()  # the tests' clock starts now: the watcher checks that a rank's pid is not younger than its hello
SITE = {"site": "train.py:23", "file": "/lessons/cluster-network/train.py", "func": "<module>", "code": "model = DDP(net)"}

def _free_port() -> int:
    with socket.socket() as s: s.bind(("127.0.0.1", 0)); return s.getsockname()[1]

def _rank_events(rank: int, host: str, pid: int, colls: list) -> list[dict]:
    "hello, a completed init, then `colls`: (state, seq, op, t, extra) each."
    out = [{"ev": "hello", "rank": rank, "gen": 0, "t": B + 1.0, "pid": pid, "host": host},
           {"ev": "init", "rank": rank, "gen": 0, "t": B + 1.1, "state": "started"},
           {"ev": "init", "rank": rank, "gen": 0, "t": B + 1.2, "state": "completed"}]
    for state, seq, op, t, extra in colls:
        out.append({"ev": "coll", "rank": rank, "gen": 0, "t": B + t, "state": state, "seq": seq, "group": "world", "op": op,
                    "shapes": [[18696]], "dtype": None if op == "ddp_init" else "float32", **SITE, **extra})
    return out

class Node1:
    "Node 1 as the hub hears it: rank 1's track fed its events up to each look, sent through the wire format as its launcher sends it."
    def __init__(self, events: list):
        self.events, self.track, self.enc, self.dec = list(events), RankTrack(1), WireEncoder(), WireDecoder()

    def look(self, w, now: float) -> None:
        now += B
        while self.events and self.events[0]["t"] <= now: self.track.feed(self.events.pop(0))
        self.track.alive = True
        line = self.enc.encode(node_message("t", 1, "node1", now, {1: self.track}))
        w.hub.take(json.loads(line), len(line), "198.18.0.2", self.dec, now=now)

def _hub(tmp_path, rank0_events: list) -> CrossNodeWatcher:
    "The hub on node 0, rank 0's events in its run directory."
    (tmp_path / "events").mkdir()
    events_path(tmp_path, 0).write_text("".join(json.dumps(e) + "\n" for e in rank0_events))
    w = CrossNodeWatcher(tmp_path, 2, rdzv_endpoint="127.0.0.1:0", job="t", node=0, stacks=False, local_ranks=1,
                         port=_free_port(), stall_policy="strict")  # strict: time decides (the safe policy's CPU readings are the watcher's own tests)
    assert w.role == "hub", w.role
    return w

def _close(w):
    for n in w.hub.nodes.values(): n["bye"] = True
    w.close()

def test_broadcast_that_never_reaches_node1_is_a_network_stall_from_node0(tmp_path):
    r0 = _rank_events(0, "node0", os.getpid(), [("started", 1, "ddp_init", 2.0, {}), ("completed", 1, "ddp_init", 2.05, {"dur_s": 0.05}),
                                                ("started", 2, "all_reduce", 2.1, {"ddp": "buckets"})])  # the source finished, went on
    r1 = _rank_events(1, "node1", 4242, [("started", 1, "ddp_init", 2.2, {})])  # the receiver: inside it since
    w, node1 = _hub(tmp_path, r0), Node1(r1)
    try:
        for now in (4.6, 5.0, 8.0, 8.3):
            node1.look(w, now)
            assert w.poll(B + now) is None  # under TCP_RESEND_S (6.2 s) after the last arrival: nothing yet, and no stall blamed on rank 1 either
        node1.look(w, 8.5)
        d = w.poll(B + 8.5)
    finally: _close(w)
    assert d is not None and d.kind == "network-stall" and d.culprit_ranks == [], d and d.text()
    c = d.collective
    assert (c["op"], c["seq"], c["bytes"], c["waiting"], c["done_by"]) == ("ddp_init", 1, 74784, [1], [0]), c
    assert c["nodes"]["1"] == {"node": 1, "host": "node1"} and c["diagnosed_on"]["node"] == 0, c
    assert c["idle_s"] == {"1": None}, c  # node 1 sent no CPU reading of its rank (the strict policy measures none)
    assert "ddp_init #1 (world, 74.8 KB) at train.py:23" in d.headline and "rank 1 on node 1 (host node1)" in d.headline, d.headline
    assert "MTU" in d.headline and "ping -M do -s 8972" in d.fix and "ip link" in d.fix, d.fix

def test_lossy_all_reduces_are_slow_network_on_the_hub(tmp_path):
    "40 DDP backwards: rank 1 (node 1) arrives 2 ms after rank 0 each time; every fifth then takes 230 ms instead of 15 ms."
    evs = {0: [], 1: []}
    for i in range(40):
        t0 = 10.0 + 0.5 * i
        for r, t in ((0, t0), (1, t0 + 0.002)):
            evs[r] += [("started", i + 1, "all_reduce", t, {"ddp": "buckets"}),
                       ("completed", i + 1, "all_reduce", t0 + 0.002 + (0.23 if i % 5 == 0 else 0.015), {"dur_s": 0.1})]
    r0 = _rank_events(0, "node0", os.getpid(), evs[0])
    r1 = _rank_events(1, "node1", 4242, evs[1])
    w, node1 = _hub(tmp_path, r0), Node1(r1)
    try:
        for k in range(1, 110):  # a look every 0.2 s
            node1.look(w, 10.0 + 0.2 * k)
            assert w.poll(B + 10.0 + 0.2 * k) is None  # the job is healthy: no hang verdict
        d = w.advise(B + 32.0, final=True)
    finally: _close(w)
    assert d is not None and d.kind == "slow-network" and d.advisory, d and d.headline
    assert "15 ms at the median" in d.headline and "up to 230 ms" in d.headline and "on the network, not in a rank" in d.headline, d.headline
    assert d.collective["late_ms"]["median"] == 2.0 and d.collective["n"] == 38, d.collective
