"""From a real Jupyter kernel: interrupting, restarting or killing it during a run leaves no rank alive within
5 s, and two concurrent runs (two kernels) never collide, nor does stopping one touch the other."""
import os, signal, time
from pathlib import Path
import pytest
from helpers import wait_for, survivors, gone_within
from kernel_harness import Kernel

SLEEPY = Path(__file__).parent / "scripts" / "sleepy_ranks.py"

def start_run(k: Kernel, root: Path, seconds: float = 600) -> str:
    "Launch sleepy ranks from the kernel without blocking it; return the run id once every rank is up."
    run_id = k.run(f"from distlab.run.launch import launch\n"
                   f"run = launch({str(SLEEPY)!r}, [{seconds}], nproc=2, runs_root={str(root)!r}, watch=False)\n"
                   f"print(run.run_id)").strip()
    wait_for(lambda: len(survivors(run_id)) >= 5, 90, what="torchrun, 2 ranks and their DataLoader workers")
    wait_for(lambda: all("ready" in (p.read_text() if p.exists() else "") for p in
                         [next(root.glob(f"{run_id}")) / "logs" / f"rank{r}.stdout" for r in range(2)]), 90, what="ranks ready")
    return run_id

@pytest.fixture
def kernel(tmp_path):
    k = Kernel(tmp_path); yield k; k.shutdown()

@pytest.mark.slow
def test_interrupt_while_idle_stops_the_run(kernel, tmp_path):
    run_id = start_run(kernel, tmp_path)
    kernel.interrupt()
    gone_within(run_id, 5)
    wait_for(lambda: "stopped" in kernel.run("print(run.poll() and run.poll().status)"), 10, what="status stopped")

@pytest.mark.slow
@pytest.mark.parametrize("cell_code", ["print('running', flush=True); run.wait()",            # blocked in the run's wait
                                       "import time\nprint('running', flush=True)\ntime.sleep(120)"],  # an unrelated cell
                         ids=["cell-blocked-in-wait", "unrelated-busy-cell"])
def test_interrupt_of_a_running_cell_stops_the_run(kernel, tmp_path, cell_code):
    run_id = start_run(kernel, tmp_path)
    cell = kernel.start(cell_code)
    kernel.wait_for_output(cell, "running")
    kernel.interrupt()
    gone_within(run_id, 5)
    # ipykernel drops requests that arrive while the interrupted cell is raising: ask until one is answered
    wait_for(lambda: "stopped" in kernel.run("print(run.wait(30).status)"), 15, what="status stopped")

@pytest.mark.slow
def test_kernel_restart_stops_the_run(kernel, tmp_path):
    run_id = start_run(kernel, tmp_path)
    kernel.restart()
    gone_within(run_id, 5)

@pytest.mark.slow
def test_kernel_killed_stops_the_run(kernel, tmp_path):
    run_id = start_run(kernel, tmp_path)
    os.kill(kernel.pid, signal.SIGKILL)
    gone_within(run_id, 5)

@pytest.mark.slow
def test_two_kernels_run_at_once_without_colliding(tmp_path):
    a, b = Kernel(tmp_path), Kernel(tmp_path)
    try:
        run_a = start_run(a, tmp_path)                 # the same runs root for both: a shared teaching server
        run_b = start_run(b, tmp_path, seconds=3)
        assert run_a != run_b
        ports = [a.run("import json; print(json.load(open(run.run_dir / 'run.json'))['argv'])"),
                 b.run("import json; print(json.load(open(run.run_dir / 'run.json'))['argv'])")]
        assert all("--standalone" in p for p in ports)  # torchrun picks a free port for each
        a.run("print(run.stop().status)")
        gone_within(run_a, 5)
        assert b.run("print(run.wait(120).status)").strip() == "ok"   # b ran to its end, untouched
    finally:
        a.shutdown(); b.shutdown()
