"""The `distlab` command as a user runs it: scenario outcomes as JSON, exit codes, no process left behind."""
import json, os, re, subprocess, sys, shutil
from pathlib import Path
import pytest
from helpers import gone_within

REPO = Path(__file__).resolve().parents[1]
_EXE = Path(sys.executable).parent / "distlab"  # the console script pip installed beside this python
DISTLAB = [str(_EXE)] if _EXE.exists() else [sys.executable, "-m", "distlab.cli"]

def distlab(*args, cwd, timeout=300):
    return subprocess.run(DISTLAB + [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout)

def test_list_names_every_scenario_and_fault(tmp_path):
    p = distlab("list", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    catalogue = [r for r in rows if r["family"] not in ("cluster", "monitoring")]
    assert "uneven-batches" in [r["id"] for r in catalogue]
    assert all(r["variants"]["broken"]["expected_status"] and r["symptom"] for r in catalogue)
    runs = {r["id"]: r["run"] for r in rows if r["family"] in ("cluster", "monitoring")}
    assert runs["node-mtu"] == "distlab cluster --fault node-mtu" and runs["scrape-wrong-port"] == "distlab tour --only scrape-wrong-port"
    text = distlab("list", cwd=tmp_path).stdout
    assert "\nnode faults, on 2 emulated nodes: distlab cluster --fault ID" in text and "\npushgateway-stale " in text, text

@pytest.mark.slow
def test_uneven_batches_broken_is_diagnosed_as_a_hang_and_stopped(tmp_path):
    p = distlab("run", "uneven-batches", "--variant", "broken", "--nproc", 4, "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout)
    assert out["status"] == "hung" and out["matched"] is True, out["problems"]
    d = out["diagnosis"]
    assert d["culprit_ranks"] == [3]                       # the rank that ran out of batches
    assert out["steps_per_rank"]["3"] == out["steps_per_rank"]["0"]  # it finished all of its batches ...
    states = {int(k): v for k, v in d["ranks"].items()} if isinstance(d["ranks"], dict) else {r["rank"]: r for r in d["ranks"]}
    assert "barrier" in json.dumps(states[3]) and "all_reduce" in json.dumps(states[0])  # ... and waits in the barrier
    from distlab.ui.plots import plot_progress
    labels = [t.get_text() for t in plot_progress(out["run_dir"]).axes[0].get_legend().get_texts()]
    assert re.fullmatch(r"rank 3: 5 steps \(waiting in barrier #\d+\)", labels[3]), labels  # the lesson script's 5 backwards; not "finished"
    assert all("(waiting in all_reduce #" in l for l in labels[:3]), labels
    assert Path(out["run_dir"], "result.json").exists()
    gone_within(Path(out["run_dir"]).name, 5)

@pytest.mark.slow
def test_uneven_batches_fixed_runs_equal_steps(tmp_path):
    p = distlab("run", "uneven-batches", "--variant", "fixed", "--nproc", 4, "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout)
    assert out["status"] == "ok" and out["matched"] is True and out["diagnosis"] is None
    steps = set(out["steps_per_rank"].values())
    assert len(steps) == 1 and steps.pop() > 0
    gone_within(Path(out["run_dir"]).name, 5)

def test_unknown_scenario_and_bad_arguments_fail_fast_with_the_fix(tmp_path):
    p = distlab("run", "no-such-thing", cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and "uneven-batches" in p.stderr
    p = distlab("run", "uneven-batches", "--nproc", 1, cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and "nproc>=2" in p.stderr
    p = distlab("launch", "missing_script.py", cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and "not found" in p.stderr
    assert not (tmp_path / "distlab-runs").exists() or not any((tmp_path / "distlab-runs").iterdir())

def test_ci_fails_when_a_notebook_and_its_export_disagree(tmp_path):
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        if (REPO / f).is_file():
            (tmp_path / f).parent.mkdir(parents=True, exist_ok=True); shutil.copy2(REPO / f, tmp_path / f)
    git = ["git", "-c", "user.email=t@t.invalid", "-c", "user.name=t"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "copy"]):
        subprocess.run(git + cmd, cwd=tmp_path, check=True, capture_output=True)
    env = {**os.environ, "NBDEV_BIN": str(Path(sys.executable).parent)}
    ok = subprocess.run(["bash", "scripts/check_sync.sh"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    lib = tmp_path / "distlab" / "train" / "guards.py"
    lib.write_text(lib.read_text().replace("def check_step_counts", "def check_step_counts_edited_by_hand"))
    bad = subprocess.run(["bash", "scripts/check_sync.sh"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert bad.returncode == 1 and "distlab/train/guards.py" in bad.stdout, bad.stdout + bad.stderr

SCRIPTS = Path(__file__).parent / "scripts"

def _rank_lines(text: str) -> list[str]:
    "What the ranks printed (torchrun's banner left out). Bare torchrun can run two ranks' lines together, so match records, not lines."
    import re
    return sorted(re.findall(r"rank \d+(?:: \[[^\]]*\]| says hello on stderr)", text))

@pytest.mark.slow
@pytest.mark.parametrize("exit_code", [0, 7])
def test_launch_matches_bare_torchrun_on_a_script_that_works(tmp_path, exit_code):
    bare = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone",
                           str(SCRIPTS / "user_ok.py"), str(exit_code)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    ours = distlab("launch", "--nproc", 2, SCRIPTS / "user_ok.py", exit_code, cwd=tmp_path, timeout=120)
    assert ours.returncode == bare.returncode == (0 if exit_code == 0 else 1)  # torchrun reports a failed rank as 1
    assert _rank_lines(ours.stdout) == _rank_lines(bare.stdout) == ["rank 0: [0.0, 3.0, 6.0, 9.0]", "rank 1: [0.0, 3.0, 6.0, 9.0]"]
    assert _rank_lines(ours.stderr) == ["rank 0 says hello on stderr", "rank 1 says hello on stderr"]
    assert [l for l in bare.stderr.splitlines() if "says hello" in l] != []  # bare torchrun shows it too

@pytest.mark.slow
def test_launch_diagnoses_a_users_rank_conditional_collective(tmp_path):
    p = distlab("launch", "--nproc", 2, "--json", SCRIPTS / "user_ddp_eval_on_rank0.py", "--steps", 6, cwd=tmp_path, timeout=180)
    assert p.returncode == 3, p.stdout + p.stderr   # stopped by distlab after a diagnosis
    res = json.loads(p.stdout)
    d = res["diagnosis"]
    assert res["status"] == "hung" and d["culprit_ranks"] == [0], d
    text = d["explanation"] + json.dumps(d["ranks"])
    assert "all_reduce" in text
    assert d["collective"]["culprit_site"] == "user_ddp_eval_on_rank0.py:24", d["collective"]  # the all_reduce in validate()
    assert "if rank == 0" in d["fix"] and "user_ddp_eval_on_rank0.py:32" in d["fix"], d["fix"]  # a control-flow fix, not a shape one
    gone_within(res["run_id"], 5)

# ---------------------------------------------------------------------------------------------------------------------
# `distlab launch` where `torchrun` was: torchrun's options, spellings and meanings

import argparse, re
from torch.distributed.run import get_args_parser
from distlab.cli import build_parser, launch_request, TORCHRUN_FIELDS, CONSOLE_OPTIONS, REFUSED_OPTIONS
from distlab.config import LaunchConfig, ConfigError
from distlab.run.launch import launch, torchrun_argv

SAMPLES = {  # a value (not torchrun's default) for each of torchrun's options that takes one
    "nnodes": "1:2", "nproc_per_node": "3", "rdzv_backend": "c10d", "rdzv_endpoint": "node0:29400", "rdzv_id": "job7",
    "rdzv_conf": "join_timeout=900,read_timeout=60", "max_restarts": "2", "monitor_interval": "0.5", "start_method": "fork",
    "event_log_handler": "console", "role": "trainer", "log_dir": "/tmp/elastic-logs", "redirects": "0:1,1:3", "tee": "1",
    "local_ranks_filter": "1", "duplicate_stdout_filters": "loss,,x,acc", "duplicate_stderr_filters": "warn",
    "node_rank": "1", "master_addr": "10.1.2.3", "master_port": "29511", "local_addr": "10.1.2.4", "logs_specs": "mine",
    "numa_binding": "socket", "signals_to_handle": "SIGTERM,SIGUSR1", "shutdown_timeout": "10"}
CONTEXT = {"node_rank": ["--nnodes", "2"]}  # what an option needs beside it to make sense
TARGETS = {"module": "pkg.train", "no_python": "sh", "run_path": "/abs/train.py"}

def _launch_subparser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["launch"]

def _request(words):
    return launch_request(build_parser().parse_args(["launch", *map(str, words)]), check_target=False)

def _rebuilt(words):
    "torchrun's own reading of the torchrun command line distlab builds for `distlab launch WORDS`."
    r = _request(words)
    return get_args_parser().parse_args(torchrun_argv(r.config, r.target, r.args, module=r.module, log_dir=Path("/run/torchrun"))[3:])

def _effective(ns):
    "What torchrun's run() makes of a parsed command line before it starts (standalone, one-node static)."
    ns = argparse.Namespace(**vars(ns))
    lo, _, hi = ns.nnodes.partition(":")
    ns.nnodes = (int(lo), int(hi or lo))  # "1" and "1:1" are the same
    one_node = ns.nnodes[1] == 1
    if ns.standalone or (ns.rdzv_backend == "static" and not ns.rdzv_endpoint and ns.master_port is None and one_node):
        ns.rdzv_backend, ns.rdzv_endpoint, ns.rdzv_id, ns.standalone = "c10d", "localhost:0", "(a fresh uuid)", True
    return ns

def test_every_torchrun_option_is_taken_with_its_meaning_or_refused_with_the_reason(capsys):
    torchrun, ours = get_args_parser(), {a.dest: a for a in _launch_subparser()._actions}
    options = [a for a in torchrun._actions if a.option_strings and a.dest != "help"]
    assert len(options) >= 30
    for t in options:
        placed = (t.dest in TORCHRUN_FIELDS) + (t.dest in CONSOLE_OPTIONS) + (t.dest in REFUSED_OPTIONS)
        assert placed == 1, (f"torchrun's {'/'.join(t.option_strings)} is new to distlab launch: map it to a LaunchConfig "
                             "field (TORCHRUN_FIELDS), apply it to the console (CONSOLE_OPTIONS) or refuse it with the reason")
        mine = ours.get(t.dest)
        assert mine is not None and set(t.option_strings) <= set(mine.option_strings), (t.option_strings, mine)
        plain = t.type in (None, str, int, float)  # else torchrun's own parsing function: distlab passes the text on to it
        assert (mine.nargs == 0) == (t.nargs == 0) and mine.choices == t.choices, t.dest
        assert (mine.type or str) == (t.type or str) if plain else mine.type in (None, str), t.dest
        for spelling in t.option_strings:
            words = [spelling] if t.nargs == 0 else [spelling, SAMPLES[t.dest]]
            line = [*CONTEXT.get(t.dest, []), *words, TARGETS.get(t.dest, "train.py"), "--lr", "0.1"]
            if t.dest in REFUSED_OPTIONS:
                with pytest.raises(SystemExit) as e: build_parser().parse_args(["launch", *line])
                assert e.value.code == 2 and REFUSED_OPTIONS[t.dest] in capsys.readouterr().err
                continue
            theirs = get_args_parser().parse_args(line)
            if plain: assert getattr(build_parser().parse_args(["launch", *line]), t.dest) == getattr(theirs, t.dest), spelling
            if t.dest in CONSOLE_OPTIONS: continue  # what reaches the console: test_console_shows_what_torchruns_would
            for watch in ([], ["--no-watch"]):
                rebuilt = _rebuilt([*watch, *line])
                assert getattr(rebuilt, t.dest) == getattr(theirs, t.dest), (spelling, watch)
                if watch or t.dest == "no_python":  # unwatched, torchrun runs the same thing
                    assert (rebuilt.training_script, rebuilt.training_script_args) == (theirs.training_script, theirs.training_script_args)

def test_options_left_out_keep_torchruns_defaults():
    theirs, rebuilt = _effective(get_args_parser().parse_args(["train.py"])), _effective(_rebuilt(["--no-watch", "train.py"]))
    own = {"nproc_per_node", "log_dir", "redirects", "tee", "rdzv_id"}  # 2 ranks by default; distlab's logs; a fresh uuid either way
    assert {k: v for k, v in vars(rebuilt).items() if k not in own} == {k: v for k, v in vars(theirs).items() if k not in own}
    assert rebuilt.nproc_per_node == "2"

@pytest.mark.parametrize("redirects,tee,only", [("0", "0", ""), ("3", "0", ""), ("1", "2", ""), ("0:1,1:2", "0", ""),
                                                ("3", "0:1", ""), ("0", "0", "1"), ("3", "3", "0"), ("2", "1", "0,1")])
def test_console_shows_what_torchruns_would(tmp_path, redirects, tee, only):
    from torch.distributed.elastic.multiprocessing.api import DefaultLogsSpecs, Std
    dest = DefaultLogsSpecs(log_dir=str(tmp_path), redirects=Std.from_str(redirects), tee=Std.from_str(tee),
                            local_ranks_filter={int(r) for r in only.split(",")} if only else None).reify({0: {}, 1: {}})
    r = _request(["--nproc-per-node", 2, "-r", redirects, "-t", tee, *(["--local-ranks-filter", only] if only else []), "train.py"])
    for rank in (0, 1):
        assert r.shows(rank, "stdout") == (dest.stdouts[rank] == "" or rank in dest.tee_stdouts), (rank, "stdout")
        assert r.shows(rank, "stderr") == (dest.stderrs[rank] == "" or rank in dest.tee_stderrs), (rank, "stderr")

def _value(argv, flag): return argv[argv.index(flag) + 1]

def test_torchruns_documented_command_lines():
    r = _request(["--standalone", "--nnodes=1", "--nproc-per-node=2", "train.py", "--arg1", "x"])
    c = r.config
    assert (c.standalone, c.nnodes, c.min_nnodes, c.nproc, c.watch, r.target, r.args) == (True, 1, None, 2, True, "train.py", ["--arg1", "x"])
    argv = torchrun_argv(c, r.target, r.args, module=r.module, log_dir=Path("/run/torchrun"))
    assert "--standalone" in argv and _value(argv, "--nproc-per-node") == "2" and _value(argv, "--nnodes") == "1"
    assert argv[-5:] == ["-m", "distlab.rank.shim", "train.py", "--arg1", "x"]

    r = _request(["--nnodes=1:2", "--nproc-per-node=2", "--max-restarts=3", "--rdzv-id=job7", "--rdzv-backend=c10d",
                  "--rdzv-endpoint=node0:29400", "train.py"])
    c = r.config
    assert (c.min_nnodes, c.nnodes, c.max_restarts, c.rdzv_id, c.rdzv_backend, c.rdzv_endpoint, c.standalone) == \
        (1, 2, 3, "job7", "c10d", "node0:29400", False)
    argv = torchrun_argv(c, r.target, r.args, module=r.module, log_dir=Path("/run/torchrun"))
    assert [_value(argv, f) for f in ("--nnodes", "--rdzv-backend", "--rdzv-endpoint", "--rdzv-id", "--max-restarts")] == \
        ["1:2", "c10d", "node0:29400", "job7", "3"] and "--standalone" not in argv

    r = _request(["--nnodes=2", "--node-rank=1", "--master-addr=node0", "--master-port=29500", "--nproc-per-node=2", "train.py"])
    argv = torchrun_argv(r.config, r.target, r.args, module=r.module, log_dir=Path("/run/torchrun"))
    assert [_value(argv, f) for f in ("--nnodes", "--rdzv-backend", "--node-rank", "--master-addr", "--master-port")] == \
        ["2", "static", "1", "node0", "29500"]

    r = _request(["--nproc_per_node", "2", "-m", "pkg.train", "--epochs", "1"])
    assert (r.module, r.target, r.args) == (True, "pkg.train", ["--epochs", "1"])
    assert torchrun_argv(r.config, r.target, r.args, module=r.module, log_dir=Path("/run/torchrun"))[-6:] == \
        ["-m", "distlab.rank.shim", "-m", "pkg.train", "--epochs", "1"]

    r = _request(["--nproc-per-node=2", "--no-python", "bash", "-c", "echo $RANK"])
    assert (r.config.no_python, r.config.watch, r.target, r.args) == (True, False, "bash", ["-c", "echo $RANK"])
    assert torchrun_argv(r.config, r.target, r.args, module=r.module, log_dir=Path("/run/torchrun"))[-4:] == \
        ["--no-python", "bash", "-c", "echo $RANK"]
    assert "collective watch is off" in r.notes[0]

@pytest.mark.parametrize("words,says", [
    (["--nproc", 0, "x.py"], ["--nproc-per-node 0: use a whole number of ranks, 1 or more"]),
    (["--nproc-per-node", 0, "x.py"], ["--nproc-per-node 0: use a whole number of ranks, 1 or more"]),
    (["--nproc-per-node=2", "missing.py", "--lr", 1], ["missing.py not found", "(use -m for a module)"]),
    (["--nproc-per-node", "two", "--standalone", "--nnodes", 2, "--timeout", -1, "missing.py"],
     ["4 problems", "--nproc-per-node 'two'", "--standalone True: standalone keeps the rendezvous on this machine",
      "--timeout -1.0: use a positive number of seconds", "missing.py not found"]),
    (["--nnodes", "two", "x.py"], ["--nnodes two: write N or MIN:MAX"]),
    (["-m", "--no-python", "x.py"], ["-m with --no-python"]),
    (["--no-python", "no-such-program-here"], ["no-such-program-here not found: --no-python runs it as a program"]),
    (["--logs-specs", "mine", "x.py"], ["--logs-specs: distlab reads every rank's output"]),
    (["--start-method", "thread", "x.py"], ["argument --start-method/--start_method: invalid choice: 'thread'"]),
])
def test_launch_refuses_bad_input_before_anything_starts(tmp_path, words, says):
    (tmp_path / "x.py").write_text("print('never runs')\n")
    p = distlab("launch", *words, cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and p.stdout == "", p.stdout + p.stderr
    for bit in says: assert bit in p.stderr, (bit, p.stderr)
    assert "module=True" not in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not (tmp_path / "distlab-runs").exists()

def test_launch_config_wrong_types_are_config_errors_naming_the_field(tmp_path):
    with pytest.raises(ConfigError) as e: LaunchConfig(timeout_s="5", nproc="4", max_restarts=1.5, watch="no", master_port=True)
    assert sorted(p.split("=")[0] for p in e.value.problems) == ["master_port", "max_restarts", "nproc", "timeout_s", "watch"]
    assert "timeout_s='5': use a number or None, not str" in e.value.problems
    (tmp_path / "x.py").write_text("")
    with pytest.raises(ConfigError, match="stall_after_s='3'"): launch(tmp_path / "x.py", stall_after_s="3", runs_root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()

def _records(text: str, pattern: str) -> list[str]: return sorted(re.findall(pattern, text))

@pytest.mark.slow
@pytest.mark.parametrize("flags,exit_code", [
    (["--standalone", "--nnodes=1", "--nproc_per_node=2"], 0),
    (["--nproc-per-node", "2", "--role", "trainer", "--local-ranks-filter", "1", "--max_restarts=0", "--monitor-interval", "0.2"], 7),
])
def test_launch_with_torchruns_options_matches_bare_torchrun(tmp_path, flags, exit_code):
    script = str(SCRIPTS / "user_ok.py")
    bare = subprocess.run([sys.executable, "-m", "torch.distributed.run", *flags, script, str(exit_code)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    ours = distlab("launch", *flags, script, exit_code, cwd=tmp_path, timeout=120)
    assert ours.returncode == bare.returncode == (0 if exit_code == 0 else 1), ours.stderr
    ranks = [1] if "--local-ranks-filter" in flags else [0, 1]
    assert _rank_lines(ours.stdout) == _rank_lines(bare.stdout) == [f"rank {r}: [0.0, 3.0, 6.0, 9.0]" for r in ranks]
    assert _rank_lines(ours.stderr) == _rank_lines(bare.stderr) == [f"rank {r} says hello on stderr" for r in ranks]
    runs = list((tmp_path / "distlab-runs").iterdir())
    assert len(runs) == 1 and (runs[0] / "logs" / "rank0.stdout").read_text().startswith("rank 0: ")  # every rank is in the logs

@pytest.mark.slow
def test_launch_no_python_runs_a_program_as_bare_torchrun_does(tmp_path):
    flags, program = ["--nproc-per-node=2", "--no-python"], str(SCRIPTS / "user_program.sh")
    bare = subprocess.run([sys.executable, "-m", "torch.distributed.run", *flags, program, "3"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    ours = distlab("launch", *flags, program, 3, cwd=tmp_path, timeout=120)
    assert ours.returncode == bare.returncode == 1, ours.stderr  # torchrun reports a failed rank as 1
    assert _records(ours.stdout, r"rank \d of 2") == _records(bare.stdout, r"rank \d of 2") == ["rank 0 of 2", "rank 1 of 2"]
    assert _records(ours.stderr, r"rank \d says hello") == _records(bare.stderr, r"rank \d says hello") == ["rank 0 says hello", "rank 1 says hello"]
    assert "collective watch is off" in ours.stderr


def test_doctor_prometheus_on_an_unreachable_url_says_so_in_one_line_within_seconds(tmp_path):
    import socket, time
    with socket.socket() as s: s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]  # nothing listens there once closed
    t0 = time.monotonic()
    p = distlab("doctor", "--prometheus", f"127.0.0.1:{port}", cwd=tmp_path, timeout=30)
    took = time.monotonic() - t0
    assert p.returncode == 2 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    (line,) = p.stderr.strip().splitlines()  # one line, no traceback
    assert line.startswith("distlab: error: cannot reach Prometheus at ") and f"http://127.0.0.1:{port}" in line, line
    assert "connection refused" in line and "9090" in line, line  # what went wrong, and where Prometheus listens by default
    assert took < 10, took
    with socket.socket() as mute:  # a server that takes the connection and never answers: a timeout, not a hang
        mute.bind(("127.0.0.1", 0)); mute.listen()
        t0 = time.monotonic()
        hung = distlab("doctor", "--prometheus", f"http://127.0.0.1:{mute.getsockname()[1]}", cwd=tmp_path, timeout=60)
        took = time.monotonic() - t0
    assert hung.returncode == 2 and len(hung.stderr.strip().splitlines()) == 1 and "no answer within 3 s" in hung.stderr, hung.stderr
    assert took < 10, took
    bad = distlab("doctor", "--prometheus", "ftp://host:9090", cwd=tmp_path, timeout=30)
    assert bad.returncode == 2 and "not an http(s) URL" in bad.stderr and "http://localhost:9090" in bad.stderr, bad.stderr
