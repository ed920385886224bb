"""distlab.watch.signatures against captured logs: each fixture in tests/fixtures/logs/<id>.txt shows exactly its
own signature, with the figures a person needs; a healthy run's log shows none. The CPU cases are also re-run live
(marked slow) so a change in torch's wording shows up here."""
import importlib.util
from pathlib import Path
import pytest
from distlab.watch.signatures import SIGNATURES, first_signature, match_signatures

LOGS = Path(__file__).parent / "fixtures" / "logs"
SCRIPTS = Path(__file__).parent / "scripts" / "signatures"
# no one-GPU machine can produce these (they need two ranks, a driver mismatch or a second process on the GPU):
# reconstructed by hand in torch 2.x's wording. The watchdog, CUDA OOM and wrong-device logs are real (an H100).
RECONSTRUCTED = {"nccl-duplicate-gpu", "nccl-version-mismatch", "nccl-unhandled-cuda-error"}

# What each fixture's first match must say: (rank on the matching line, details that must be present)
EXPECTED = {
    "nccl-duplicate-gpu": (None, {"ranks": [0, 1], "bus_id": "1a000"}),
    "nccl-version-mismatch": (0, {"nccl_versions": {1: "2.27.5", 0: "2.26.2"}}),
    "nccl-unhandled-cuda-error": (2, {"nccl_version": "2.27.5",
        "last_error": "Cuda failure 803 'system has unsupported display driver / cuda driver combination'"}),
    "nccl-watchdog-timeout": (0, {"seq": 4, "op": "ALLREDUCE", "timeout_ms": 5000, "ran_ms": 5098,
                                  "last_enqueued": 4, "last_completed": 3}),
    "cuda-oom": (0, {"tried_gib": 118.77, "free_gib": 78.4, "total_gib": 79.18, "allocated_gib": 0.11, "gpu": 0}),
    "collective-wrong-device": (0, {"device_type": "cpu"}),
    "cpu-oom": (None, {"requested_gib": 8.0}),
    "port-in-use": (None, {}),
    "dataloader-shm": (None, {"signal": "Bus error"}),
    "dataloader-worker-killed": (None, {"signal": "Killed"}),
    "dataloader-shm-full": (0, {"pids": [20037]}),
    "ddp-unused-parameters": (None, {"parameters": ["aux.bias", "aux.weight"], "indices": [4, 5]}),
    "ddp-model-mismatch": (None, {"param_index": 0, "other_rank": 0}),
    "weights-only-load": (None, {"global": "__main__.TrainState"}),
    "checkpoint-device": (None, {"saved_on": "cuda", "devices_here": 0}),
    "state-dict-keys": (0, {"missing": 6, "unexpected": 6, "prefix": "module."}),
    "torn-checkpoint": (0, {}),
    "gloo-size-mismatch": (None, {"received_bytes": 1536, "expected_bytes": 1024}),
    "socket-interface-missing": (None, {"interface": "eth9"}),
    "non-finite-values": (0, {"step": 24, "ranks": [0, 1], "loss_ranks": [0, 1]}),
}

def read_log(name: str) -> str: return (LOGS / f"{name}.txt").read_text(errors="replace")

def check_own_signature(sid: str, text: str, rank=None, details=None, also=()):
    "`text` shows `sid` first and nothing else but `also`, with the figures in `details` (and the rank, when given)."
    found = match_signatures(text)
    assert found and found[0].id == sid and {m.id for m in found[1:]} <= set(also), \
        f"{sid}: matched {[(m.id, m.line) for m in found]}"
    m = first_signature(text)
    assert m.id == sid and m.line in text and m.line in m.context
    if rank is not None: assert m.rank == rank, (m.rank, m.line)
    for k, v in (details or {}).items(): assert m.details.get(k) == v, (sid, k, m.details)
    assert m.signature.title in m.text() and m.signature.fix in m.text()
    return m

def test_every_builtin_signature_has_a_fixture():
    assert set(EXPECTED) == set(SIGNATURES), set(EXPECTED) ^ set(SIGNATURES)
    for sid in SIGNATURES:
        head = read_log(sid).split("\n", 1)[0]
        assert head.startswith("# reconstructed" if sid in RECONSTRUCTED else "# real log"), (sid, head)

@pytest.mark.parametrize("sid", sorted(EXPECTED))
def test_fixture_shows_exactly_its_signature(sid):
    rank, details = EXPECTED[sid]
    m = check_own_signature(sid, read_log(sid), rank, details)
    if sid == "port-in-use": assert isinstance(m.details["port"], int) and str(m.details["port"]) in m.line
    if sid.startswith("dataloader-"): assert m.details["pids"] and all(isinstance(p, int) for p in m.details["pids"])
    if sid == "ddp-unused-parameters": assert m.rank in (0, 1) and m.details["rank"] == m.rank

def test_cuda_oom_on_a_shared_gpu_names_the_other_process():
    "The reconstructed two-job case: another process holds part of the GPU, and the figures say how much."
    text = (LOGS / "cuda-oom-shared-gpu.txt").read_text()
    assert text.startswith("# reconstructed")
    check_own_signature("cuda-oom", text, 1, {"tried_gib": 8.0, "free_gib": 2.84, "total_gib": 79.19, "reserved_gib": 69.66,
                        "reserved_unallocated_gib": 2.96, "allocated_gib": 66.7, "gpu": 1, "other_processes_gib": {40871: 6.02}})

def test_a_checkpoint_from_a_second_gpu_on_a_one_gpu_machine():
    "torch's other wording of checkpoint-device (real, one H200): the storages name cuda:1, torch counts one GPU here."
    text = read_log("checkpoint-device-count")
    assert text.startswith("# real log")
    check_own_signature("checkpoint-device", text, None, {"saved_on": "cuda:1", "devices_here": 1})

def test_healthy_run_matches_nothing():
    text = read_log("healthy")
    assert "training finished" in text
    assert match_signatures(text) == [] and first_signature(text) is None

def test_signatures_in_one_log_come_in_order_of_appearance():
    text = read_log("port-in-use") + "\n" + read_log("cuda-oom") + "\n" + read_log("ddp-unused-parameters")
    found = match_signatures(text)
    assert [m.id for m in found] == ["port-in-use", "cuda-oom", "ddp-unused-parameters"]
    assert [m.line_no for m in found] == sorted(m.line_no for m in found)
    assert text.split("\n")[found[1].line_no - 1] == found[1].line

def _capture_module():
    spec = importlib.util.spec_from_file_location("signature_capture", SCRIPTS / "capture.py")
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod

# A worker killed by SIGBUS may surface in its rank as "exited unexpectedly" after the worker's own shm message
CONSEQUENCES = {"dataloader-shm": {"dataloader-worker-killed"}}
# Figures a live re-run must reproduce (the others carry pids, ports or timing-dependent wording)
LIVE_DETAILS = {"cpu-oom": {"requested_gib": 8.0}, "weights-only-load": {"global": "__main__.TrainState"},
                "checkpoint-device": {"saved_on": "cuda", "devices_here": 0},
                "ddp-unused-parameters": {"parameters": ["aux.bias", "aux.weight"]},
                "ddp-model-mismatch": {"param_index": 0, "sizes": [32, 8], "other_rank": 0},
                "gloo-size-mismatch": {"received_bytes": 1536, "expected_bytes": 1024}}

@pytest.mark.slow
@pytest.mark.parametrize("case", ["healthy", "port-in-use", "ddp-unused-parameters", "ddp-model-mismatch",
                                  "weights-only-load", "checkpoint-device", "dataloader-worker-killed", "dataloader-shm", "cpu-oom",
                                  "gloo-size-mismatch"])
def test_live_run_still_shows_its_signature(case):
    "Re-run the script behind a real fixture with the installed torch: its log still shows the same signature."
    text = _capture_module().run_case(case)
    if case == "healthy": assert match_signatures(text) == [], text[-3000:]
    else: check_own_signature(case, text, details=LIVE_DETAILS.get(case), also=CONSEQUENCES.get(case, ()))


# --- the diagnosis a user reads: a rank dies with one of these logs, and the rank-died rule names its cause and fix

from distlab.contract import make_run_dir, log_path
from distlab.watch.diagnosis import tracks_from_events
from distlab.watch.rules import diagnose

DIAGNOSED = sorted(p.stem for p in LOGS.glob("*.txt") if p.stem in SIGNATURES)


@pytest.mark.parametrize("sig_id", DIAGNOSED)
def test_a_rank_that_died_with_a_known_error_is_diagnosed_with_its_cause_and_fix(sig_id, tmp_path):
    run = make_run_dir(tmp_path / "run")
    log = (LOGS / f"{sig_id}.txt").read_text()
    log_path(run, 1, "stderr").write_text(log)  # what the rank printed, as the launcher stores it
    t0 = 1000.0
    hello = lambda r: {"ev": "hello", "rank": r, "t": t0, "pid": 4000 + r, "gen": 0}
    init = lambda r: {"ev": "init", "rank": r, "t": t0 + 0.5, "state": "completed", "gen": 0}
    events = {0: [hello(0), init(0), {"ev": "coll", "rank": 0, "t": t0 + 1, "state": "started", "seq": 1, "group": "world",
                                      "op": "all_reduce", "shapes": [[10]], "dtype": "float32", "site": "train.py:20", "gen": 0}],
              1: [hello(1), init(1), {"ev": "exit", "rank": 1, "t": t0 + 1.2, "status": "exception", "code": 1, "gen": 0,
                                      "error": "RuntimeError: see stderr", "traceback": ""}]}
    tracks = tracks_from_events(events)
    d = diagnose(tracks, 2, t0 + 5, final=True, run_dir=run)
    sig = SIGNATURES[sig_id]
    assert d is not None and d.kind == "rank-died" and d.culprit_ranks == [1], d
    assert sig.title in d.headline, d.headline
    assert sig.cause in d.explanation and sig.fix.split("\n")[0] in d.fix, (d.explanation, d.fix)
    assert "stopped with an exception in its own code" not in d.explanation
