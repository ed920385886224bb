"""A learner without root: a scenario that needs root ends as one line, `not run: needs root (...)`, within seconds,
through the lab a walkthrough uses, `distlab run` and `try_fix`, and leaves no process, cgroup or run directory."""
import json, os, pwd, shutil, subprocess, sys, tempfile, time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
USER = "nobody"  # a real unprivileged account on every Debian-like system


def _untraversable(paths: list[Path]) -> dict[Path, set[str]]:
    "The highest directory on the way to each path that others may not enter (/root is 0700), with the children needed below it."
    out: dict[Path, set[str]] = {}
    for p in paths:
        p = p.resolve()
        for d in reversed(p.parents):
            if not os.stat(d).st_mode & 0o001:
                out.setdefault(d, set()).add(p.relative_to(d).parts[0]); break
    return out


def as_user(argv: list[str], user: str, home: Path, keep: Path, env: dict | None = None) -> list[str]:
    """`argv` run as `user` by `runuser`, in a mount namespace of its own where the directories this interpreter sits under
    (a venv made from /root/.pyenv, say) are reachable: each one others may not enter is covered by a 0755 tmpfs holding only
    the subtrees needed, bound from the real ones. Nothing of it outlives the process."""
    need = [Path(sys.executable), Path(sys.base_prefix), Path(sys.prefix), ROOT]
    lines = ["set -e", f"mount -t tmpfs tmpfs {keep}"]  # the binds wait here, in this namespace only
    for i, (d, children) in enumerate(_untraversable(need).items()):
        for j, c in enumerate(sorted(children)):
            lines += [f"mkdir {keep}/{i}-{j}", f"mount --bind {d / c} {keep}/{i}-{j}"]
        lines.append(f"mount -t tmpfs -o mode=755 tmpfs {d}")
        for j, c in enumerate(sorted(children)):
            lines += [f"mkdir {d / c}", f"mount --move {keep}/{i}-{j} {d / c}"]
    envs = [f"{k}={v}" for k, v in {"HOME": str(home), "PATH": os.environ.get("PATH", ""), **(env or {})}.items()]
    lines.append('exec runuser -u "$0" -- env -i "$@"')
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", "\n".join(lines), user, *envs, *argv]


def _cgroups() -> dict[str, set[int]]:
    "distlab's cgroups (a scenario's limits) and the owners of the processes in each."
    out = {}
    for d in Path("/sys/fs/cgroup").glob("*/distlab*"):
        try: out[str(d)] = {Path(f"/proc/{pid}").stat().st_uid for pid in (d / "cgroup.procs").read_text().split()}
        except OSError: pass  # removed while we looked
    return out


def _made_since(before: dict, uid: int) -> set[str]:
    "Cgroups made since `before` that are empty or hold a process of `uid` (other jobs' runs on this machine hold theirs)."
    return {d for d, owners in _cgroups().items() if d not in before and (not owners or uid in owners)}


def _pids(uid: int) -> set[int]:
    return {int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and p.stat().st_uid == uid}


SNIPPET = r"""
import contextlib, io, json, sys, time
t0 = time.time()
from distlab.ui.lab import ScenarioLab
from distlab.scenarios import NotRunnable, SCENARIOS
from distlab.scenarios.runner import not_run_reason
from distlab.scenarios.lesson import try_fix, script_source
runs = sys.argv[1]
out = {"uid": __import__("os").getuid(), "reason": not_run_reason(SCENARIOS["shm-too-small"], 2)}
lab = ScenarioLab(family="doctor", nproc=2, runs_root=runs)
with contextlib.redirect_stdout(io.StringIO()) as said:
    out["returned"] = lab.run("broken", scenario="shm-too-small", block=True)
out["lab_said"], out["outcomes"] = said.getvalue(), lab.outcomes
try: try_fix("checkpoint-disk-full", script_source("checkpoint-disk-full", "fixed"), runs_root=runs); out["try"] = "ran"
except NotRunnable as e: out["try"] = str(e)
out["try_reason"] = not_run_reason(SCENARIOS["checkpoint-disk-full"], 2)
import distlab.cli
with contextlib.redirect_stderr(io.StringIO()) as err:
    try: distlab.cli.main(["run", "shm-too-small", "--runs-root", runs])
    except SystemExit as e: out["cli_code"] = e.code
out["cli_said"] = err.getvalue()
with contextlib.redirect_stdout(io.StringIO()) as said:  # the tour's node faults: emulated nodes need root too
    try: distlab.cli.main(["tour", "--only", "node-socket-ifname", "--runs-root", runs, "--plots", runs + "-plots"])
    except SystemExit as e: out["tour_code"] = e.code
out["tour_said"], out["seconds"] = said.getvalue(), time.time() - t0
print("RESULT " + json.dumps(out, default=str))
"""


@pytest.mark.timeout(60)
def test_needs_root_scenario_is_not_run_for_a_learner_without_root():
    missing = [t for t in ("runuser", "unshare", "mount") if shutil.which(t) is None]
    if missing: pytest.skip(f"needs {', '.join(missing)} to run as another user (apt-get install util-linux mount)")
    if os.geteuid() != 0: pytest.skip(f"runs the check as user {USER!r} through runuser, which needs root; this is uid {os.geteuid()}")
    try: uid = pwd.getpwnam(USER).pw_uid
    except KeyError: pytest.skip(f"no user {USER!r} on this machine to run as")
    home = Path(tempfile.mkdtemp(prefix="distlab-learner-"))
    try:
        keep, runs = home / ".binds", home / "runs"
        keep.mkdir(); os.chown(home, uid, -1)
        before_pids, before_cgroups = _pids(uid), _cgroups()
        argv = as_user([sys.executable, "-c", SNIPPET, str(runs)], USER, home, keep,
                       env={"PYTHONPATH": str(ROOT), "MPLCONFIGDIR": str(home / "mpl")})
        t0 = time.time()
        p = subprocess.run(argv, capture_output=True, text=True, timeout=50, cwd=home)
        wall_s = time.time() - t0
        got = next((json.loads(l[7:]) for l in p.stdout.splitlines() if l.startswith("RESULT ")), None)
        assert got is not None, f"exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
        why = got["reason"]
        assert got["uid"] == uid and why.startswith("not run: needs root (") and "tmpfs" in why, got
        # the lab: one line, no run, an outcome that says why (a walkthrough's Run All goes on)
        assert got["returned"] is None and got["lab_said"] == f"shm-too-small / broken: {why}\n", got
        (o,) = got["outcomes"]
        assert (o["scenario"], o["variant"], o["status"], o["not_run"], o["run_dir"]) == ("shm-too-small", "broken", "not run", why, None), o
        # FixIt's try and the CLI say the same line; the CLI exits 77 (skipped), not 1 (failed) or 2 (bad input)
        assert got["try"] == got["try_reason"] and got["try"].startswith("not run: needs root ("), got
        assert got["cli_code"] == 77 and got["cli_said"] == f"distlab: shm-too-small (broken): {why}\n", got
        # the tour: each node fault's variant is one `not run` line, and the tour is not failed for it
        said = got["tour_said"].splitlines()
        assert got["tour_code"] == 0 and [l.split(" ... ")[0] for l in said[:2]] == ["[ 1/2] node-socket-ifname broken", "[ 2/2] node-socket-ifname fixed"], got
        assert all("... not run: " in l and "root" in l for l in said[:2]) and "0/0 as expected" in got["tour_said"], got["tour_said"]
        assert got["seconds"] < 30, got  # no rank was started: what time it took is imports
        # nothing left: no process of the user, no cgroup, no run directory or try folder
        deadline = time.time() + 5
        while _pids(uid) - before_pids and time.time() < deadline: time.sleep(0.1)
        assert not _pids(uid) - before_pids, f"processes of {USER} left: {_pids(uid) - before_pids}"
        assert not _made_since(before_cgroups, uid), f"cgroups left: {_made_since(before_cgroups, uid)}"
        assert not runs.exists() or not any(runs.rglob("*")), sorted(runs.rglob("*"))
        assert not (home / "runs-plots").exists() or not any((home / "runs-plots").rglob("*"))
        assert not list(keep.iterdir()), "the binds' tmpfs lived in the namespace only"
        print(f"as {USER}: not run in {wall_s:.1f} s wall ({got['seconds']:.1f} s in the process)")
    finally:
        shutil.rmtree(home, ignore_errors=True)
