"""The watch across nodes at 256 ranks, simulated (no torchrun; benchmarks/cross_node_scale.py's streams, shaped from a
recorded run's events): 32 nodes of 8 ranks train, each node's launcher state goes over the channel's wire format to a
real hub on node 0, which reads its own ranks' event files. Then the last rank calls the step-count check's all_gather
where the 255 others all-reduce: node 0 names it with its node, host, global rank and both call sites, by the same code
path as on two real nodes; and while they trained, the hub held node 7's ranks as node 7 did (fields, window, times)."""
import importlib.util, json
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "cross_node_scale.py"
spec = importlib.util.spec_from_file_location("cross_node_scale", BENCH)
scale = importlib.util.module_from_spec(spec); spec.loader.exec_module(scale)

def _view(steps: int, ddp_steps: int, max_seq: dict, open_: list, colls: list, last_done: dict | None) -> dict:
    "What the rules read of a rank."
    return {"steps": steps, "ddp_steps": ddp_steps, "max_seq": dict(max_seq), "open": sorted(map(list, open_)),
            "colls": sorted((c["seq"], c["op"], c["state"], c["site"], json.dumps(c.get("shapes"))) for c in colls),
            "last_done": last_done and last_done["seq"]}

def _sent(s: dict) -> dict:
    "A node's view of its rank: the `rank_state` it would send whole."
    return _view(s["steps"], s["ddp_steps"], s["max_seq"], s["open"], s["colls"], s["last_done"])

def _held(t) -> dict:
    "The hub's view: the track its decoder holds, every collective in it."
    return _view(t.steps, t.ddp_steps, t.max_seq, t.open, [c for g in t.colls.values() for c in g.values()], t.last_done)

def test_mismatch_among_256_ranks_named_from_node0():
    seen = {}
    def on_look(k, w, others):  # mid-training: the hub's tracks of node 7's ranks against node 7's own
        if k != 8: return
        from distlab.watch.cross_node import rank_state
        tracks = w._merged(w.hub.snapshot())
        node = others[6]
        seen["node"] = node.node
        seen["pairs"] = [(_sent(rank_state(node.tracks[r])), _held(tracks[r])) for r in node.tracks]
        seen["t0_skew_s"] = max(abs(node.tracks[r].colls[g][q]["t0"] - c["t0"]) for r in node.tracks
                                for g, recs in tracks[r].colls.items() for q, c in recs.items())
    res = scale.simulate(256, looks=12, hang_looks=15, on_look=on_look)
    assert seen["node"] == 7 and len(seen["pairs"]) == 8
    for theirs, hub in seen["pairs"]:
        assert theirs["colls"] and hub == theirs, (hub, theirs)
    assert seen["t0_skew_s"] < 0.002  # times travel in ms, on the hub's clock
    d = res["diagnosis"]
    assert d is not None and d.kind == "mismatch", d and d.headline
    assert d.culprit_ranks == [255], d.headline
    assert "rank 255 on node 31 (host node31)" in d.headline, d.headline
    assert "all_gather" in d.headline and "guards.py:36" in d.headline and "trainer.py:172" in d.headline, d.headline
    assert d.collective["nodes"]["255"] == {"node": 31, "host": "node31"}
    assert d.collective["diagnosed_on"]["node"] == 0
    assert d.ranks[255]["doing"].startswith("[node 31, node31] inside all_gather"), d.ranks[255]["doing"]
    assert d.ranks[3]["node"] == 0 and d.ranks[200]["node"] == 25  # every rank placed: here, or from its node's looks
    assert res["diag_t"] - res["hang_t"] <= 1.0  # within a second of simulated time (the target for a mismatch)
