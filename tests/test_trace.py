"""`DISTLAB_TRACE`: every rank of an unmodified script writes a torch.profiler trace that Holistic Trace Analysis reads."""
import json
from pathlib import Path
from distlab.contract import trace_path
from distlab.run.launch import launch

SCRIPT = Path(__file__).parent / "scripts" / "user_ddp_train.py"

def test_an_unmodified_script_gets_one_trace_per_rank_that_hta_reads(tmp_path):
    res = launch(SCRIPT, ["8"], nproc=2, runs_root=tmp_path, trace_steps="2,3", timeout_s=120).wait()
    assert res.status == "ok", res
    for rank in (0, 1):
        trace = json.loads(trace_path(res.run_dir, rank).read_text())
        info = trace["distributedInfo"]
        assert (info["rank"], info["world_size"], info["backend"]) == (rank, 2, "gloo")
        steps = {e["name"] for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")}
        assert len(steps) == 3, steps  # the window asked for: 3 optimizer steps after 2
    from hta.trace_analysis import TraceAnalysis  # the dev extra installs it
    ta = TraceAnalysis(trace_dir=str(Path(res.run_dir) / "traces"))
    assert sorted(ta.t.traces) == [0, 1]
    names = set(ta.t.symbol_table.sym_table)
    assert "gloo:all_reduce" in names, sorted(n for n in names if "all" in n)  # DDP's bucket all-reduce, seen in the trace
