"""The lab's blocking paths in a real kernel: interrupting a cell that waits in `RunMonitor.wait()` stops the run,
a monitor follows a user's own script (not a scenario) to its end, and `lab.run` shows its live view in the output
of the cell that called it."""
from pathlib import Path
import pytest
from helpers import wait_for, survivors, gone_within
from kernel_harness import Kernel

SLEEPY = Path(__file__).parent / "scripts" / "sleepy_ranks.py"


@pytest.fixture
def kernel(tmp_path):
    k = Kernel(tmp_path); yield k; k.shutdown()


def _launch(k: Kernel, root: Path, seconds: float) -> str:
    return k.run(f"from distlab.run.launch import launch\nfrom distlab.ui.lab import RunMonitor\n"
                 f"run = launch({str(SLEEPY)!r}, [{seconds}], nproc=2, runs_root={str(root)!r}, watch=False)\n"
                 f"mon = RunMonitor(run)\nprint(run.run_id)").strip()


@pytest.mark.slow
def test_interrupt_of_monitor_wait_stops_the_run(kernel, tmp_path):
    run_id = _launch(kernel, tmp_path, 600)
    wait_for(lambda: len(survivors(run_id)) >= 3, 90, what="torchrun and its ranks")
    cell = kernel.start("print('waiting', flush=True); mon.wait()")
    kernel.wait_for_output(cell, "waiting")
    kernel.interrupt()
    gone_within(run_id, 5)
    # the ranks are gone at once; the Run records its result a moment later: poll until the view has it
    wait_for(lambda: "True stopped" in kernel.run("print(mon.update(), getattr(run.poll(), 'status', None))"), 10,
             what="the view says stopped")


@pytest.mark.slow
def test_monitor_follows_a_user_script_to_its_end(kernel, tmp_path):
    _launch(kernel, tmp_path, 1)
    out = kernel.run("res = mon.wait(120)\n"
                     "print(res.status, sorted(k for k in mon.panes if k != 'torchrun'), 'hung' not in mon.status.value)\n"
                     "print(any('ready' in o.get('text', '') for o in mon.panes[0].out.outputs))", timeout_s=180)
    assert out.split() == ["ok", "[0,", "1]", "True", "True"], out


@pytest.mark.slow
def test_interrupt_of_scenario_lab_block_run_stops_the_run(kernel, tmp_path):
    runs = tmp_path / "runs"
    cell = kernel.start(f"from distlab.ui.lab import ScenarioLab\n"
                        f"lab = ScenarioLab(family='hangs', nproc=2, backend='gloo', runs_root={str(runs)!r})\n"
                        f"lab.run('fixed', scenario='stalled-rank', block=True)")
    # the live view is in the output of the cell that started the run, not only in the lab's panel above it
    view = kernel.wait_for_display(cell, "application/vnd.jupyter.widget-view+json", 90)
    run_dir = wait_for(lambda: next(runs.glob("*"), None) if runs.exists() else None, 90, what="the run directory")
    wait_for(lambda: len(survivors(run_dir.name)) >= 3, 90, what="torchrun and its ranks")
    kernel.interrupt()
    gone_within(run_dir.name, 5)
    wait_for(lambda: "stopped" in kernel.run("print(lab.current.poll() and lab.current.poll().status)"), 10, what="status stopped")
    assert view["model_id"] in kernel.run("print(lab.monitor.widget.model_id)"), view
    assert "distlab-elsewhere" in kernel.run("print(lab.monitor_box.children[0].value)")  # the lab's panel says where the view is


def test_a_blocking_wait_handles_a_click_and_keeps_the_next_cell(kernel):
    "`widget_events` in a real kernel: a button click sent while a cell blocks is handled in that cell; a cell sent meanwhile runs after it."
    model_id = kernel.run("import time, ipywidgets as W\nfrom distlab.ui.lab import widget_events\n"
                          "b, clicks = W.Button(), []\nb.on_click(lambda _: clicks.append(time.time()))\nprint(b.model_id)").strip()
    cell = kernel.start("with widget_events() as pump:\n    print('pumping', pump is not None, flush=True)\n"
                        "    end = time.time() + 60\n    while not clicks and time.time() < end: pump(0.1)\n"
                        "print('clicked', len(clicks), flush=True)")
    kernel.wait_for_output(cell, "pumping True")
    after = kernel.start("print('next cell', len(clicks))")  # queued behind the blocking cell, as Run All queues it
    click = {"comm_id": model_id, "data": {"method": "custom", "content": {"event": "click"}}}
    kernel.kc.shell_channel.send(kernel.kc.session.msg("comm_msg", click))
    kernel.wait_for_output(cell, "clicked 1", 30)
    kernel.wait_for_output(after, "next cell 1", 30)
