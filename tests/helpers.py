"""Shared helpers for distlab's tests: polling with deadlines and looking for a run's processes."""
import time
from distlab.run.reaper import run_processes

def wait_for(pred, timeout_s: float, interval_s: float = 0.05, what: str = "condition"):
    "Poll `pred` until it returns something truthy; fail the test after `timeout_s`."
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        v = pred()
        if v: return v
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")

def survivors(run_id: str) -> list[str]:
    "Command lines of processes of `run_id` still alive."
    out = []
    for p in run_processes(run_id):
        try: out.append(" ".join(p.cmdline()))
        except Exception: pass
    return out

def gone_within(run_id: str, timeout_s: float = 5.0):
    "Assert no process of `run_id` is alive `timeout_s` from now at the latest."
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if not survivors(run_id): return
        time.sleep(0.1)
    raise AssertionError(f"processes of {run_id} still alive after {timeout_s}s: {survivors(run_id)}")


# --- the lesson tests (tests/test_lessons_*.py): a scenario's script lines, its tries, its runs, what ran

def script_line(sid: str, snippet: str, variant: str = "broken") -> tuple[str, int]:
    "(file name, N): N the one line of scenario `sid`'s `variant` script whose statement starts with `snippet`."
    from distlab.scenarios import SCENARIOS
    path = SCENARIOS[sid].script_path(variant)
    hits = [n for n, l in enumerate(path.read_text().splitlines(), 1) if l.strip().startswith(snippet)]
    assert len(hits) == 1, f"{snippet!r} is on {len(hits)} lines of {path}"
    return path.name, hits[0]


def line_of(sid: str, snippet: str, variant: str = "broken") -> str:
    "How a diagnosis names that line: `broken.py:N`."
    return "%s:%d" % script_line(sid, snippet, variant)


def traceback_line(sid: str, snippet: str, variant: str = "broken") -> str:
    "How a Python traceback names that line: `broken.py\", line N`."
    return '%s", line %d' % script_line(sid, snippet, variant)


def script_lines(sid: str, *snippets: str, variant: str = "broken") -> set[str]:
    "`broken.py\", line N` for every line of the script whose statement starts with one of `snippets` (any number of lines)."
    from distlab.scenarios import SCENARIOS
    path = SCENARIOS[sid].script_path(variant)
    return {f'{path.name}", line {n}' for n, l in enumerate(path.read_text().splitlines(), 1) if l.strip().startswith(snippets)}


def run_tries(tries, root, fixes, nproc: int = 2) -> list:
    "Each try (scenario, learner's script under `fixes`/scenario/) graded on `nproc` real gloo ranks, two at a time; their verdicts, in order."
    from concurrent.futures import ThreadPoolExecutor
    from distlab.scenarios.lesson import try_fix
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda t: try_fix(t[0], fixes / t[0] / t[1], nproc=nproc, backend="gloo", runs_root=root), tries))


def all_gone(runs: dict, timeout_s: float = 5.0):
    "Every run's processes (walkthrough outcomes and tries' verdicts alike) are gone within `timeout_s`."
    from pathlib import Path
    for o in runs.values():
        run_dir = (o.outcome if hasattr(o, "outcome") else o).run_dir
        if run_dir is not None: gone_within(Path(run_dir).name, timeout_s)  # None: not run here (a GPU's variant), nothing started


def assert_ran(run_dir, script, nproc: int | None = None):
    "Every rank of the run (all `nproc` of them, when given) ran exactly `script` (a path): the script shown is the script that ran."
    import hashlib
    from pathlib import Path
    from distlab.scenarios.lesson import ran_hashes
    want = hashlib.sha256(Path(script).read_bytes()).hexdigest()
    got = ran_hashes(run_dir)
    assert got and set(got.values()) == {want}, (str(script), got)
    if nproc is not None: assert sorted(got) == list(range(nproc)), (str(script), got)


def assert_verdict(v, passes: bool, says: str, script):
    "A try's verdict: passed or not as expected, saying `says` in its reasons, and run from the learner's `script`."
    assert v.passed is passes, v.text()
    assert says in " ".join(v.reasons), v.text()
    assert_ran(v.outcome.run_dir, script)


def lesson_runs(walkthroughs, stems, sids, tries, root, fixes, nproc: int = 2, variants=None) -> dict:
    "A lesson test's runs: ('try', scenario, script) -> verdict of each try, ('run', scenario, variant) -> outcome of each of `sids`' runs in walkthroughs `stems` (each made once per session); every variant wanted (`variants`, default all) ran, and nothing of any run is left."
    from distlab.scenarios import SCENARIOS
    out = {("try", s, n): v for (s, n, *_), v in zip(tries, run_tries(tries, root, fixes, nproc))}
    for stem in stems:
        for (sid, variant), o in walkthroughs.by_variant(stem).items():
            if sid in sids: out["run", sid, variant] = o
    want = {(s, v) for s in sids for v in (variants or SCENARIOS[s].variants)}
    ran = {(s, v) for k, s, v in out if k == "run"}
    assert ran >= want, f"not run by {stems}: {sorted(want - ran)}"
    all_gone(out)
    return out
