"""`distlab bench` as a user runs it: a real world-2 gloo sweep read as nccl-tests would, and bad input refused at once."""
import json, subprocess, sys
from pathlib import Path
import psutil, pytest

from distlab.run.bench import BenchResult, bench, size_sweep
from distlab.run.launch import gpu_driver_present
from distlab.watch.bandwidth import BENCH_OPS, bus_factor, sized_for

_EXE = Path(sys.executable).parent / "distlab"
DISTLAB = [str(_EXE)] if _EXE.exists() else [sys.executable, "-m", "distlab.cli"]
MINB, MAXB, STEP = 8, 65536, 8

@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    "One `distlab bench --json --plot` of all five ops at world 2 on gloo: (process, parsed JSON, plot path)."
    d = tmp_path_factory.mktemp("bench")
    plot = d / "busbw.png"
    p = subprocess.run(DISTLAB + ["bench", "--nproc", "2", "--backend", "gloo", "--op", *BENCH_OPS, "-b", str(MINB), "-e", str(MAXB),
                                  "-f", str(STEP), "-n", "5", "-w", "1", "--json", "--plot", str(plot), "--runs-root", str(d / "runs")],
                       capture_output=True, text=True, timeout=180, cwd=d)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p, json.loads(p.stdout), plot

def test_every_element_comes_back_right(sweep):
    _, out, _ = sweep
    assert (out["world_size"], out["backend"]) == (2, "gloo")
    assert [r["wrong"] for r in out["rows"]] == [0] * len(out["rows"])

def test_rows_cover_the_sizes_asked_for_each_op(sweep):
    _, out, _ = sweep
    for op in BENCH_OPS:
        got = [(r["size_bytes"], r["count"]) for r in out["rows"] if r["op"] == op]
        assert got == [sized_for(op, s, 4, 2) for s in size_sweep(MINB, MAXB, STEP)], op
    ag = [r for r in out["rows"] if r["op"] == "all_gather"]
    assert all(r["size_bytes"] == r["count"] * 2 * 4 for r in ag)  # size: the gathered output; count: per rank

def test_bandwidths_follow_nccl_tests_formulas(sweep):
    _, out, _ = sweep
    for r in out["rows"]:
        assert r["time_us"] == max(r["time_us_per_rank"]) and len(r["time_us_per_rank"]) == 2  # the slowest rank
        assert r["algbw_gbps"] == pytest.approx(r["size_bytes"] / 1e9 / (r["time_us"] / 1e6), rel=1e-12)
        assert r["busbw_gbps"] == r["algbw_gbps"] * bus_factor(r["op"], 2), r
        assert r["busbw_of_memcpy"] == pytest.approx(r["busbw_gbps"] / out["memcpy_gbps"], rel=1e-12)
        assert (r["redop"], r["root"], r["type"]) == (("sum" if r["op"] in ("all_reduce", "reduce_scatter") else "none"),
                                                      0 if r["op"] == "broadcast" else -1, "float")
    assert out["memcpy_gbps"] > 0 and len(out["memcpy_gbps_per_rank"]) == 2

def test_the_table_reads_like_nccl_tests_and_the_plot_is_written(sweep):
    p, out, plot = sweep
    table = p.stderr  # with --json, stdout is the JSON alone
    assert "world size 2, backend gloo, torch " in table
    assert "busbw = algbw x 2(n-1)/n for all_reduce, (n-1)/n for all_gather/reduce_scatter/all_to_all, 1 for broadcast; GB/s = bytes/1e9/s" in table
    for col in ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "busbw/memcpy", "(us)", "(GB/s)"):
        assert col in table, col
    assert BenchResult.from_dict(out).table() in table
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 10_000

@pytest.mark.parametrize("kw, problem, fix", [
    (dict(ops=["all_reduce", "alreduce"]), "'alreduce' is not a collective", "use all_reduce, all_gather"),
    (dict(minbytes="1M", maxbytes="1K"), "minbytes=1048576", "make minbytes <= maxbytes"),
    (dict(nproc=0), "nproc=0", "start at least 1 rank"),
    pytest.param(dict(backend="nccl"), "backend='nccl': this machine has no GPU driver", "use backend='gloo'",
                 marks=pytest.mark.skipif(gpu_driver_present(), reason="this machine has a GPU driver")),
])
def test_bad_input_is_refused_before_anything_starts(tmp_path, kw, problem, fix):
    with pytest.raises(ValueError) as e: bench(runs_root=tmp_path, **kw)
    assert problem in str(e.value) and fix in str(e.value), str(e.value)
    assert list(tmp_path.iterdir()) == [] and psutil.Process().children(recursive=True) == []

def test_the_command_line_names_the_problem_and_exits_2(tmp_path):
    p = subprocess.run(DISTLAB + ["bench", "--op", "allreduse", "--nproc", "0", "--runs-root", str(tmp_path)],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    assert "'allreduse' is not a collective" in p.stderr and "nproc=0: start at least 1 rank" in p.stderr, p.stderr
    assert list(tmp_path.iterdir()) == []

@pytest.mark.gpu
def test_nccl_world_1_times_every_op_on_the_gpu(tmp_path):
    res = bench(BENCH_OPS, nproc=1, backend="nccl", maxbytes="32M", iters=10, warmup=2, runs_root=tmp_path)  # 8 B x 4^k up to 32 MiB
    assert res.backend == "nccl" and res.device != "cpu"
    assert [r.wrong for r in res.rows] == [0] * len(res.rows)
    big = [r for r in res.rows if r.op == "all_reduce"][-1]
    assert big.size_bytes == 32 * 2**20 and big.algbw_gbps > 0 and big.busbw_gbps == 0.0  # one rank: nothing crosses a link
    # timed with CUDA events: a host clock around calls that only queue work would give copies far past any HBM's speed
    assert 50 < res.memcpy_gbps < 5000, res.memcpy_gbps
