"""The hangs family on real torchrun ranks at world 2: each broken variant gets its diagnosis (kind, culprit rank,
collective, line), each fixed variant runs clean, and no process of any run survives it. Every variant's run is the
walkthrough's (examples/01_hangs_and_mismatches.ipynb, run once per session by the `walkthroughs` fixture). The
scenarios whose diagnosis races something (RACY: gloo aborting a rank, an error that may be swallowed) run their
broken variant REPEATS times in all, and must be diagnosed the same way every time."""
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
import pytest
from distlab.scenarios import SCENARIOS, run_scenario
from helpers import gone_within

# the family at world 2 on gloo, as walkthrough 01 runs it; a GPU-only scenario (collective-wrong-device: NCCL refusing a
# host tensor) is recorded there as not run on CPU, and tests/test_lessons_wrong_device.py runs it on a GPU
HANGS = sorted(s.id for s in SCENARIOS.values() if s.family == "hangs" and not s.needs_gpu)
GPU_ONLY = sorted(s.id for s in SCENARIOS.values() if s.family == "hangs" and s.needs_gpu)
NPROC = 2  # the walkthrough's world size; tests/test_cli.py runs uneven-batches broken and fixed at world 4
WALKTHROUGH = "01_hangs_and_mismatches"
REPEATS = 3  # runs of each racy broken variant (the walkthrough's is the first): the same diagnosis every time
CONCURRENT = 2  # jobs side by side: the repeats start beside the walkthrough (one run at a time), then go two at a time
# The scenarios whose diagnosis races something, and what: these repeat. The others are decided by counts or by a
# wait that never ends (init-hang's world size, a deadlock, a worker asleep for good), the same on every run; they
# run once, in the walkthrough. (Measured side by side, 2 cores, load ~2: the 14 repeats take 59.5 s, two at a time;
# nine repeats of every scenario, as before, 353 s.)
RACY = {
    "uneven-batches": "gloo may abort a rank on the barrier's size against the all-reduce's before the mismatch is seen",
    "oom-retry-alone": "the same barrier against a gradient all-reduce",
    "rank-conditional-collective": "gloo may abort a rank with 'Received data size doesn't match'",
    "collective-mismatch": "gloo may fail one side with a size error while the other waits",
    "random-extra-collective": "gloo may abort a rank on the sizes of the two all-reduces",
    "dataloader-worker-crash": "the worker's death is raised by a signal handler and may be swallowed, then found at the loader's 5 s check",
    "init-port-taken": "rank 0's EADDRINUSE against the other ranks' wait at the store",
}

pytestmark = pytest.mark.timeout(900)  # the first test here may be the one that runs the walkthrough


def run(tmp_path, sid: str, variant: str, nproc: int):
    "Run a scenario to the end; assert that no process of it is left."
    o = run_scenario(sid, variant, nproc=nproc, runs_root=tmp_path, backend="gloo")
    gone_within(Path(o.run_dir).name)
    return o


def lesson_line(sid: str, snippet: str, variant: str = "broken") -> str:
    "`broken.py:N`, N the line of scenario `sid`'s lesson script whose statement starts with `snippet`."
    path = SCENARIOS[sid].script_path(variant)
    hits = [n for n, l in enumerate(path.read_text().splitlines(), 1) if l.strip().startswith(snippet)]
    assert len(hits) == 1, f"{snippet!r} is on {len(hits)} lines of {path}"
    return f"{path.name}:{hits[0]}"


def signature(o) -> tuple:
    "What must not change from run to run: kind, culprit ranks, and the collective (op and call site) of each side."
    d = o.diagnosis
    if d["kind"] == "rank-died":  # no collective of its own: what it died of (where the others wait depends on timing)
        return (d["kind"], tuple(d["culprit_ranks"]), d["headline"].split(" (pid")[0])
    c = d.get("collective") or {}
    return (d["kind"], tuple(d["culprit_ranks"]), c.get("op"), c.get("site"), c.get("culprit_op"), c.get("culprit_site"))


@pytest.fixture(scope="module")
def background_repeats(tmp_path_factory):
    "The other REPEATS - 1 broken runs of every hangs scenario, started now in the background, at most CONCURRENT jobs at a time."
    root, slots = tmp_path_factory.mktemp("repeats"), threading.BoundedSemaphore(CONCURRENT)
    jobs = [sid for _ in range(REPEATS - 1) for sid in HANGS if sid in RACY]  # round robin: runs that wait sit beside runs that compute
    def one(sid):
        with slots:
            try: return run(root, sid, "broken", NPROC)
            except Exception as e: return e
    pool = ThreadPoolExecutor(CONCURRENT)
    yield SimpleNamespace(slots=slots, futures=[(sid, pool.submit(one, sid)) for sid in jobs])
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def outcomes(walkthroughs, background_repeats):
    "Every variant of every hangs scenario at world 2: the runs of the walkthrough (one per variant)."
    with background_repeats.slots:  # the walkthrough, one run at a time, is one of the CONCURRENT jobs while it runs
        runs = walkthroughs.by_variant(WALKTHROUGH)
    out = {k: o for k, o in runs.items() if k[0] in HANGS}
    assert set(out) == {(sid, v) for sid in HANGS for v in SCENARIOS[sid].variants}, sorted(out)
    assert {o.nproc for o in out.values()} == {NPROC}
    for o in out.values(): gone_within(Path(o.run_dir).name)
    return out


# what each broken variant must show at world size `nproc`, beyond its Expect (kind, culprits, status)
def check_uneven_batches(d, o, nproc):
    c = d["collective"]
    assert (c["op"], c["culprit_op"]) == ("all_reduce", "barrier") and d["culprit_ranks"] == [nproc - 1]
    assert c["culprit_site"] == lesson_line("uneven-batches", "dist.barrier()")  # the end of the epoch
    assert c["site"] == lesson_line("uneven-batches", "loss.backward()")  # the others' next step: DDP's gradient all-reduce
    assert o.steps_per_rank == {r: 5 for r in range(nproc)}, o.steps_per_rank  # 5 steps done everywhere: none lost

def check_rank_conditional(d, o, nproc):
    c = d["collective"]
    assert (c["op"], c["culprit_op"]) == ("all_reduce", "all_reduce")
    assert "[[3]]" in d["headline"] and "rank 0 " in d["headline"]  # the metrics tensor, against a gradient bucket
    assert c["culprit_site"] == lesson_line("rank-conditional-collective", "dist.all_reduce(sums)")  # inside evaluate(), rank 0 only
    assert c["site"] == lesson_line("rank-conditional-collective", "loss.backward()")  # the gradient all-reduce
    assert o.steps_per_rank == {r: 2 for r in range(nproc)}, o.steps_per_rank  # EVAL_EVERY=2: rank 0 parts after step 2

def check_collective_mismatch(d, o, nproc):
    c = d["collective"]
    assert (c["op"], c["culprit_op"]) == ("all_gather", "all_gather")
    assert "[[6]" in d["explanation"] and "[[5]" in d["explanation"]  # both sides' shapes (6 and 5 predictions)
    assert c["culprit_site"] == c["site"] == lesson_line("collective-mismatch", "dist.all_gather(parts, mine)")

def line_after(sid: str, snippet: str, variant: str = "broken") -> int:
    "The number of the line after the one line of `sid`'s script that starts with `snippet`."
    return int(lesson_line(sid, snippet, variant).split(":")[1]) + 1

def check_stalled_rank(d, o, nproc):
    assert "rank 0 never entered" in d["headline"], d["headline"]
    assert d["collective"]["op"] == "all_reduce"
    assert d["collective"]["site"] == lesson_line("stalled-rank", "loss.backward()")  # where the others wait
    flush = line_after("stalled-rank", "def flush(self):")  # its `with self.lock:`: the thread waits for itself
    assert f'broken.py", line {flush} in flush' in d["stacks"]["0"], d["stacks"].get("0")
    assert "Stack of rank 0" in o.diagnosis_text and f"line {flush} in flush" in o.diagnosis_text, o.diagnosis_text
    called = lesson_line("stalled-rank", "self.flush()  # BUG").split(":")[1]  # the call, holding the lock
    assert f'broken.py", line {called} in record' in d["stacks"]["0"], d["stacks"].get("0")
    assert o.steps_per_rank == {r: 3 for r in range(nproc)}, o.steps_per_rank  # FLUSH_EVERY=3: the third step's row

def check_init_hang(d, o, nproc):
    assert d["culprit_ranks"] == list(range(nproc, 8))  # the script asked for 8
    assert d["collective"]["op"] == "init_process_group" and "world_size=8" in d["headline"]
    assert o.steps_per_rank == {r: 0 for r in range(nproc)}
    assert d["collective"]["site"] == lesson_line("init-hang", "dist.init_process_group(")

def check_init_port_taken(d, o, nproc):
    assert d["culprit_ranks"] == [0] and "address already in use" in d["headline"], d["headline"]
    assert "port: 12355" in d["headline"], d["headline"]  # the port the script pins, where the stale job listens
    assert o.steps_per_rank == {r: 0 for r in range(nproc)}
    assert f"at {lesson_line('init-port-taken', 'dist.init_process_group(')}" in d["headline"], d["headline"]

def check_worker_crash(d, o, nproc):
    assert "DataLoader worker" in d["headline"], d["headline"]  # the cause, on the rank that had it
    assert o.failure["rank"] == 1 and "DataLoader worker" in o.failure["error"]  # record 1: rank 1's first sample

def waits_for_a_batch(d, rank: int, sid: str):
    "`rank`'s live stack: in the DataLoader's wait for a batch, called from the script's `for x, y in loader:`."
    stack = d["stacks"][str(rank)]
    main = stack[stack.rindex("Thread 0x"):] if "Thread 0x" in stack else stack  # faulthandler lists the main thread last
    loop = lesson_line(sid, "for x, y in loader:").split(":")[1]
    assert "_try_get_data" in main and f'broken.py", line {loop} in' in main, main

def check_fork_deadlock(d, o, nproc):
    assert d["culprit_ranks"] == [0] and "rank 0 never entered" in d["headline"], d["headline"]
    assert (d["collective"]["op"], d["collective"]["site"]) == ("all_reduce", lesson_line("worker-fork-deadlock", "loss.backward()"))
    waits_for_a_batch(d, 0, "worker-fork-deadlock")
    assert o.steps_per_rank == {r: 0 for r in range(nproc)}, o.steps_per_rank  # no batch ever reaches rank 0
    w = d["collective"].get("worker") or {}  # the evidence that named it in seconds, not the asleep rank's 30 s: its worker on a lock
    assert w.get("rank") == 0 and w.get("idle_s", 0) >= 3 and f"pid {w.get('pid')}, stuck on a lock" in d["headline"], (w, d["headline"])
    assert "multiprocessing_context='spawn'" in d["fix"], d["fix"]

def check_stuck_read(d, o, nproc):
    assert d["culprit_ranks"] == [1] and "rank 1 never entered" in d["headline"], d["headline"]
    assert (d["collective"]["op"], d["collective"]["site"]) == ("all_reduce", lesson_line("worker-stuck-read", "loss.backward()"))
    waits_for_a_batch(d, 1, "worker-stuck-read")
    assert o.steps_per_rank == {r: 0 for r in range(nproc)}, o.steps_per_rank

def check_oom_retry_alone(d, o, nproc):  # distlab.scenarios.divergence; tests/test_lessons_divergence.py checks it further
    c = d["collective"]
    assert (c["culprit_op"], c["culprit_site"]) == ("barrier", lesson_line("oom-retry-alone", "dist.barrier()"))
    assert (c["op"], c["site"]) == ("all_reduce", lesson_line("oom-retry-alone", "loss.backward()"))

def check_random_extra_collective(d, o, nproc):
    c = d["collective"]
    assert c["culprit_site"] == lesson_line("random-extra-collective", "dist.all_reduce(mean)")
    assert c["site"] == lesson_line("random-extra-collective", "loss.backward()")

CHECKS = {"uneven-batches": check_uneven_batches, "rank-conditional-collective": check_rank_conditional,
          "collective-mismatch": check_collective_mismatch, "stalled-rank": check_stalled_rank,
          "init-hang": check_init_hang, "init-port-taken": check_init_port_taken,
          "dataloader-worker-crash": check_worker_crash, "worker-fork-deadlock": check_fork_deadlock,
          "worker-stuck-read": check_stuck_read,
          "oom-retry-alone": check_oom_retry_alone, "random-extra-collective": check_random_extra_collective}


def test_every_hangs_scenario_has_checks():
    assert set(HANGS) == set(CHECKS), "add a check_* for each scenario of the hangs family"
    assert GPU_ONLY == ["collective-wrong-device"], f"a GPU-only hangs scenario needs GPU tests of its own, as tests/test_lessons_wrong_device.py: {GPU_ONLY}"
    assert set(RACY) <= set(HANGS), set(RACY) - set(HANGS)
    for sid in HANGS:
        s = SCENARIOS[sid]
        assert {"broken", "fixed"} <= set(s.variants) and s.explanation and s.symptom
        assert s.variants["fixed"].expect.status == "ok"


@pytest.mark.slow
@pytest.mark.parametrize("sid", HANGS)
def test_broken_is_diagnosed(outcomes, sid):
    o = outcomes[sid, "broken"]
    assert o.matched, f"{o.problems}\n{o.diagnosis_text}"
    CHECKS[sid](o.diagnosis, o, NPROC)


@pytest.mark.slow
@pytest.mark.parametrize("sid", HANGS)
def test_fixed_runs_clean(outcomes, sid):
    o = outcomes[sid, "fixed"]
    assert o.matched, f"{o.problems}\nfailure: {o.failure}\n{o.diagnosis_text or ''}"
    assert o.diagnosis is None and len(set(o.steps_per_rank.values())) == 1 and o.steps_per_rank[0] > 0, o.steps_per_rank


@pytest.mark.slow
def test_a_dataloader_timeout_turns_the_stuck_read_into_an_error(outcomes):
    "worker-stuck-read's `timeout` variant: the rank whose worker is stuck fails with the DataLoader's own error, naming it."
    o = outcomes["worker-stuck-read", "timeout"]
    assert o.matched, f"{o.problems}\n{o.diagnosis_text}"
    assert o.diagnosis["culprit_ranks"] == [1] and "DataLoader timed out after 10 seconds" in o.diagnosis["headline"], o.diagnosis["headline"]
    assert o.failure["rank"] == 1 and o.steps_per_rank == {0: 0, 1: 0}, (o.failure, o.steps_per_rank)


@pytest.mark.slow
def test_a_scripts_steps_reach_the_progress_plot(outcomes):
    "A plain script's steps are its DDP backwards (it writes no step events); the lab's progress plot reads them in a hung run."
    from distlab.watch.analysis import read_rank_events
    from distlab.ui.plots import plot_progress
    o = outcomes["uneven-batches", "broken"]  # a lesson script: no distlab in it, no `step` events
    assert not [e for e in read_rank_events(o.run_dir, 0) if e["ev"] == "step"]
    labels = [t.get_text() for t in plot_progress(o.run_dir).axes[0].get_legend().get_texts()]
    assert labels[0].startswith("rank 0: 5 steps (waiting in all_reduce #"), labels
    assert labels[1].startswith("rank 1: 5 steps (waiting in barrier #"), labels


@pytest.fixture(scope="module")
def repeats(outcomes, background_repeats):
    "REPEATS broken runs of every hangs scenario: the walkthrough's first, then the background ones."
    out = {sid: [outcomes[sid, "broken"]] for sid in HANGS if sid in RACY}
    for sid, f in background_repeats.futures: out[sid].append(f.result())
    return out


@pytest.mark.slow
@pytest.mark.parametrize("sid", sorted(RACY))
def test_broken_diagnosis_is_the_same_every_time(repeats, sid):
    "Every run of a racy broken variant gives the same diagnosis (kind, culprit ranks, op, call site), the expected one."
    runs = repeats[sid]
    assert len(runs) == REPEATS
    for i, o in enumerate(runs):
        if isinstance(o, Exception): raise AssertionError(f"run {i + 1} of {sid} did not run to the end") from o
        assert o.matched, f"run {i + 1}: {o.problems}\n{o.diagnosis_text}"
    seen = Counter(signature(o) for o in runs)
    assert len(seen) == 1, f"different diagnoses in {REPEATS} runs (the first alone, the others {CONCURRENT} at a time): {dict(seen)}"
