"""`srun distlab launch train.py` with no other flag: two `distlab launch` processes on this machine, each with the
variables srun gives one of two nodes, form one two-node job through torchrun's c10d rendezvous; a start that cannot
work (the batch script of a multi-node job) is refused at once with the command that works."""
import os, subprocess, sys, textwrap, time
from pathlib import Path
import pytest
from distlab.run.reaper import free_port

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = textwrap.dedent("""
    import os, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    print(f"rank {dist.get_rank()} of {dist.get_world_size()} on node {os.environ['GROUP_RANK']}: sum {t.item():.0f}", flush=True)
    dist.destroy_process_group()
""")

def srun_env(node: int, nodes: int, port: int, tmp_path: Path, **more) -> dict:
    "The variables `srun --nodes N --ntasks-per-node=1` sets for the task on node `node` (a subset: what distlab reads, and a few more)."
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PET_", "MASTER_"))}
    return {**env, "SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_NNODES": str(nodes), "SLURM_STEP_NUM_NODES": str(nodes),
            "SLURM_NODEID": str(node), "SLURM_PROCID": str(node), "SLURM_LOCALID": "0", "SLURM_NTASKS": str(nodes),
            "SLURM_STEP_NODELIST": "localhost,127.0.0.1"[:None if nodes > 1 else 9], "SLURM_JOB_NODELIST": "localhost,127.0.0.1",
            "SLURM_STEP_TASKS_PER_NODE": f"1(x{nodes})", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1",
            "DISTLAB_RUNS_ROOT": str(tmp_path / f"node{node}"), **more}

@pytest.mark.slow
def test_srun_distlab_launch_needs_no_other_flag(tmp_path):
    # Both "nodes" are this machine, so both would take the rendezvous host (localhost) for their own; on real nodes
    # only the first one is. torchrun's c10d rendezvous setting `is_host` says which, as the hostnames would.
    script = tmp_path / "train.py"; script.write_text(SCRIPT)
    port = free_port()
    procs = [subprocess.Popen([sys.executable, "-m", "distlab.cli", "launch", str(script)], cwd=tmp_path,
                              env=srun_env(i, 2, port, tmp_path, PET_RDZV_CONF=f"is_host={int(i == 0)}"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(2)]
    try: outs = [p.communicate(timeout=240)[0] for p in procs]
    finally:
        for p in procs: p.kill() if p.poll() is None else None
    assert [p.returncode for p in procs] == [0, 0], outs
    import re
    seen = {(int(m[1]), int(m[2]), int(m[3]), int(m[4])) for o in outs for m in re.finditer(r"rank (\d+) of (\d+) on node (\d+): sum (\d+)", o)}
    world = len(seen)  # distlab's default ranks per node, on each of the 2 nodes
    assert world >= 2 and world % 2 == 0 and {w for _, w, _, _ in seen} == {world}, outs
    assert {(r, n) for r, _, n, _ in seen} == {(r, r // (world // 2)) for r in range(world)}, outs  # node 0 then node 1
    assert {s for *_, s in seen} == {world * (world + 1) // 2}, outs  # one all_reduce over both nodes' ranks

def test_batch_script_of_a_multi_node_job_is_refused_with_the_srun_command(tmp_path):
    script = tmp_path / "train.py"; script.write_text(SCRIPT)
    env = {k: v for k, v in srun_env(0, 2, free_port(), tmp_path).items() if k not in ("SLURM_STEP_ID", "SLURM_STEP_NUM_NODES", "SLURM_STEP_NODELIST")}
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "distlab.cli", "launch", str(script)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "srun --ntasks-per-node=1 distlab launch" in p.stderr, (p.returncode, p.stderr)
    assert time.monotonic() - t0 < 30 and not (tmp_path / "node0").exists()  # refused before anything started


# --- Kubernetes: the example PyTorchJob, checked offline

CLUSTER = ROOT / "examples" / "cluster"

def test_pytorchjob_example_is_valid_and_runs_distlab_launch():
    "The example's pod template is a valid Kubernetes Pod spec (kubernetes-validate, strict); the job part is what the training operator reads."
    import yaml, kubernetes_validate
    job = yaml.safe_load((CLUSTER / "pytorchjob.yaml").read_text())
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    policy, worker = job["spec"]["elasticPolicy"], job["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert policy["rdzvBackend"] == "c10d" and policy["minReplicas"] <= worker["replicas"] <= policy["maxReplicas"]
    tmpl = worker["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{job['metadata']['name']}-worker-0"}, "spec": tmpl["spec"]}
    kubernetes_validate.validate(pod, kubernetes_validate.utils.latest_version(), strict=True)  # raises on any schema error
    (main,) = [c for c in tmpl["spec"]["containers"] if c["name"] == "pytorch"]  # the operator's default container name
    assert main["command"][:2] == ["distlab", "launch"]
    assert any(p["name"] == "pytorchjob-port" for p in main["ports"])  # where the operator points PET_RDZV_ENDPOINT
    # what the operator sets in each pod (its elastic.go), as distlab's command line reads it
    from distlab.run.schedulers import scheduler_torchrun_env
    port = next(p["containerPort"] for p in main["ports"] if p["name"] == "pytorchjob-port")
    pod_env = {"PET_RDZV_ENDPOINT": f"{job['metadata']['name']}-worker-0:{port}", "PET_RDZV_BACKEND": policy["rdzvBackend"],
               "PET_NNODES": f"{policy['minReplicas']}:{policy['maxReplicas']}", "PET_MAX_RESTARTS": str(policy["maxRestarts"]),
               "PET_N_PROC_PER_NODE": str(policy["nProcPerNode"])}
    assert scheduler_torchrun_env(pod_env) == {"PET_NPROC_PER_NODE": "4"}
    script = [sys.executable, "-c", "import os, sys; os.environ.update(" + repr({**pod_env, "PET_NPROC_PER_NODE": "4"}) + "); "
              "from distlab.cli import build_parser; a = build_parser().parse_args(['launch', 'train.py']); "
              "print(a.nnodes, a.nproc_per_node, a.rdzv_backend, a.rdzv_endpoint, a.max_restarts)"]
    out = subprocess.run(script, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.split() == ["2:2", "4", "c10d", f"distlab-train-worker-0:{port}", "3"], (out.stdout, out.stderr)


def test_slurm_batch_example_starts_one_launch_per_node():
    text = (CLUSTER / "slurm_job.sh").read_text()
    assert "#SBATCH --ntasks-per-node=1" in text and "\nsrun distlab launch train.py" in text
