"""The launcher on real torchrun ranks: results, logs, and no orphans after stop, timeout, or the launcher's death."""
import json, os, signal, subprocess, sys, textwrap, time
from pathlib import Path
import pytest
from distlab.run.launch import launch
from distlab.config import ConfigError
from helpers import wait_for, survivors, gone_within

SCRIPTS = Path(__file__).parent / "scripts"

def ready_ranks(run_dir: Path, n: int) -> bool:
    logs = [run_dir / "logs" / f"rank{r}.stdout" for r in range(n)]
    return all(p.exists() and "ready" in p.read_text() for p in logs)

def test_stop_leaves_no_process(tmp_path):
    run = launch(SCRIPTS / "sleepy_ranks.py", nproc=2, runs_root=tmp_path, watch=False)
    wait_for(lambda: ready_ranks(run.run_dir, 2), 90, what="both ranks ready")
    assert len(survivors(run.run_id)) >= 5  # torchrun + 2 ranks + 2 DataLoader workers
    res = run.stop()
    assert res.status == "stopped"
    gone_within(run.run_id, 5)
    assert json.loads((run.run_dir / "result.json").read_text())["status"] == "stopped"

def test_timeout_leaves_no_process(tmp_path):
    run = launch(SCRIPTS / "sleepy_ranks.py", nproc=2, runs_root=tmp_path, watch=False, timeout_s=20)
    res = run.wait()
    assert res.status == "timeout"
    gone_within(run.run_id, 5)

def test_wait_deadline_stops_the_run(tmp_path):
    run = launch(SCRIPTS / "sleepy_ranks.py", nproc=2, runs_root=tmp_path, watch=False)
    wait_for(lambda: ready_ranks(run.run_dir, 2), 90, what="both ranks ready")
    assert run.wait(timeout_s=0.5).status == "timeout"
    gone_within(run.run_id, 5)

def test_sigkill_of_the_launching_process_leaves_no_process(tmp_path):
    code = textwrap.dedent(f"""
        import sys, time
        from distlab.run.launch import launch
        run = launch({str(SCRIPTS / 'sleepy_ranks.py')!r}, nproc=2, runs_root={str(tmp_path)!r}, watch=False)
        print(run.run_id, run.run_dir, flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    run_id, run_dir = parent.stdout.readline().split()
    wait_for(lambda: ready_ranks(Path(run_dir), 2), 90, what="both ranks ready")
    assert len(survivors(run_id)) >= 5
    parent.send_signal(signal.SIGKILL); parent.wait()
    gone_within(run_id, 5)

def test_failing_rank_is_reported_with_its_traceback(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text(textwrap.dedent("""
        import torch.distributed as dist
        dist.init_process_group("gloo")
        if dist.get_rank() == 1:
            raise RuntimeError("bad batch on rank 1")
        dist.barrier()
    """))
    res = launch(script, nproc=2, runs_root=tmp_path, watch=False).wait(120)
    assert res.status == "failed"
    assert res.failure["rank"] == 1 and res.exit_codes[1] == 1
    assert "bad batch on rank 1" in (run_stderr := (Path(res.run_dir) / "logs" / "rank1.stderr").read_text()), run_stderr
    gone_within(res.run_id, 5)

def test_bad_input_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        launch(tmp_path / "missing.py", runs_root=tmp_path)
    with pytest.raises(ConfigError) as e:
        launch("x", module=True, nproc=0, backend="nccl2", runs_root=tmp_path)
    assert "nproc=0" in str(e.value) and "backend='nccl2'" in str(e.value)
    assert not any(tmp_path.iterdir())  # no half-made run directory

def test_a_restart_after_a_rank_failure_keeps_the_run_going(tmp_path):
    run = launch(SCRIPTS / "fails_once.py", [tmp_path / "failed-once"], nproc=2, runs_root=tmp_path, max_restarts=1)
    res = run.wait(180)
    assert res.status == "ok", (res.status, res.warnings)
    assert res.restarts == 1
    (why,) = res.restart_reasons
    assert (why["generation"], why["rank"], why["exitcode"]) == (0, 1, 1), why
    assert "flaky disk on rank 1" in why["error"], why
    assert any("rank 1" in w for w in res.warnings), res.warnings  # the death was reported, not hidden
    for rank in (0, 1):  # both generations' events and collectives are in the run dir, each with its gen
        evs = [json.loads(l) for l in (Path(res.run_dir) / "events" / f"rank{rank}.jsonl").read_text().splitlines()]
        assert {e["gen"] for e in evs if e["ev"] == "coll"} == {0, 1}, rank
        assert {e["gen"] for e in evs if e["ev"] == "hello"} == {0, 1}, rank
    saved = json.loads((Path(res.run_dir) / "result.json").read_text())
    assert saved["restarts"] == 1 and saved["restart_reasons"][0]["rank"] == 1
    from distlab.ui.lab import RunMonitor  # the lab's status line shows the generations and what ended the first
    mon = RunMonitor(run, start=False); mon.update(final=True)
    assert "restart generation 1: torchrun restarted the ranks 1 time (generation 0 ended by rank 1 (exit code 1" in mon.status.value, mon.status.value
    assert "flaky disk on rank 1" in mon.status.value
    gone_within(res.run_id, 5)

def test_internal_failures_end_in_warnings(tmp_path, monkeypatch, capfd):
    from distlab.watch.watcher import Watcher
    def broken_poll(self, *a, **k): raise RuntimeError("watcher exploded")
    monkeypatch.setattr(Watcher, "poll", broken_poll)
    def bad_on_line(rank, stream, line): raise ValueError("callback exploded")
    res = launch(SCRIPTS / "user_ok.py", nproc=2, runs_root=tmp_path, on_line=bad_on_line).wait(120)
    assert res.status == "ok" and res.exit_code == 0
    err = capfd.readouterr().err
    for what in ("watcher exploded", "callback exploded"):
        assert any(what in w for w in res.warnings), res.warnings
        assert any(what in w for w in json.loads((Path(res.run_dir) / "result.json").read_text())["warnings"])
        assert what in err, err  # on the launching process's stderr
    assert not any("exploded" in l for l in (Path(res.run_dir) / "logs" / "torchrun.stderr").read_text().splitlines())

def test_a_run_distlab_stops_does_not_print_torchruns_signal_traceback(tmp_path):
    lines = []
    res = launch(SCRIPTS / "sleeper.py", nproc=2, runs_root=tmp_path, stall_after_s=2, stall_policy="strict",  # asleep on purpose: the safe policy waits 30 s
                 on_line=lambda r, s, l: lines.append((r, l))).wait(120)
    assert res.status == "hung"
    own = [l for r, l in lines if r is None]
    assert not any("SignalException" in l or "Traceback" in l for l in own), own
    assert "distlab stopped torchrun (hung)" in own, own
    assert "SignalException" in (Path(res.run_dir) / "logs" / "torchrun.stderr").read_text()  # the raw text is kept


def test_every_rank_line_arrives_whole_with_its_rank_progress_bars_too(tmp_path):
    lines = []
    res = launch(SCRIPTS / "progress_bar.py", nproc=2, runs_root=tmp_path, watch=False,
                 on_line=lambda r, s, l: lines.append((r, s, l))).wait(120)
    assert res.status == "ok", res
    for rank in (0, 1):
        bar = [l for r, s, l in lines if r == rank and s == "stderr"]
        assert bar == [" 10%|#", " 50%|#####", "100%|##########"], bar  # one line per redraw, nothing glued together
        out = [l for r, s, l in lines if r == rank and s == "stdout"]
        assert out == [f"rank {rank} done", "no newline at the end"], out
        assert (Path(res.run_dir) / "logs" / f"rank{rank}.stderr").read_text().splitlines() == bar
    assert not any("[default" in l or "[rank" in l for _, _, l in lines), lines  # no other rank's prefix inside a line

def test_a_log_dir_of_the_users_own_keeps_torchruns_files_there_and_the_ranks_apart(tmp_path):
    mine, lines = tmp_path / "my-logs", []
    run = launch(SCRIPTS / "user_ok.py", nproc=2, runs_root=tmp_path, log_dir=mine, on_line=lambda r, s, l: lines.append((r, s, l)))
    assert "--tee" in run.argv  # other runs or nodes may write beside this one there: torchrun tags each line itself
    res = run.wait(120)
    assert res.status == "ok", res
    for rank in (0, 1):
        assert (rank, "stdout", f"rank {rank}: [0.0, 3.0, 6.0, 9.0]") in lines, lines
        assert (rank, "stderr", f"rank {rank} says hello on stderr") in lines, lines
    assert len(list(mine.glob("*/attempt_0/*/stdout.log"))) == 2  # torchrun's own files, where the user asked
