"""Two torchrun agents on 127.0.0.1 meeting through torch.distributed's c10d rendezvous: a two-node job on one machine."""
import textwrap
from pathlib import Path
import pytest
from distlab.run.launch import launch
from distlab.run.reaper import free_port
from helpers import gone_within

SCRIPT = textwrap.dedent("""
    import os, sys, time, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    time.sleep(float(sys.argv[1]))  # outlive the watcher's join timeout
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    print(f"rank {dist.get_rank()} of {dist.get_world_size()} on node-group {os.environ['GROUP_RANK']}: sum {t.item():.0f}", flush=True)
    dist.destroy_process_group()
""")

@pytest.mark.slow
@pytest.mark.parametrize("watch", [False, True])
def test_two_nodes_via_c10d_rendezvous(tmp_path, watch):
    script = tmp_path / "allreduce.py"; script.write_text(SCRIPT)
    endpoint = f"127.0.0.1:{free_port()}"
    # join_timeout_s shorter than the job: a node's watcher must not take the other node's ranks for missing ones
    nodes = [launch(script, [12 if watch else 0], nproc=1, nnodes=2, rdzv_endpoint=endpoint, rdzv_id=f"job-{watch}",
                    watch=watch, runs_root=tmp_path / f"node{i}", timeout_s=120, join_timeout_s=8.0) for i in range(2)]
    results = [n.wait() for n in nodes]
    assert [r.status for r in results] == ["ok", "ok"], [(r.failure, r.diagnosis and r.diagnosis.headline) for r in results]
    lines = sorted(l for r in results for f in Path(r.run_dir, "logs").glob("rank*.stdout") for l in f.read_text().splitlines())
    assert lines == ["rank 0 of 2 on node-group 0: sum 3", "rank 1 of 2 on node-group 1: sum 3"], lines
    if watch:  # log files are named after the global rank each node's process really has
        assert {f.name for r in results for f in Path(r.run_dir, "logs").glob("rank*.stdout")} == {"rank0.stdout", "rank1.stdout"}
    for r in results: gone_within(r.run_id, 5)
