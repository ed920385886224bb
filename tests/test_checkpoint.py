"""Checkpoints under kills: 50 SIGKILLs in the middle of saves never leave a corrupt latest checkpoint, and a job whose rank
is SIGKILLed mid-training is restarted by torchrun and ends with the losses of the run that was never interrupted."""
import os, random, re, signal, sys, time
from pathlib import Path
import pytest
import torch

from distlab.train.checkpoint import CheckpointDir
from helpers import wait_for

ROOT = Path(__file__).resolve().parents[1]


def _saver(ck: CheckpointDir, first_step: int, once: bool = False):
    "The child: save checkpoints back to back, each a tensor filled with its step, until killed."
    step = first_step
    while True:
        ck.save({"step": step, "w": torch.full((65_536,), float(step))}, step)  # 256 KiB of float32
        if once: return
        step += 1


def _kill_during_saves(ck_root: Path, kills: int, rng: random.Random, save, load) -> dict:
    "Time one save, then `kills` times: fork a saver, SIGKILL it after a random 0-3 save times, load the latest checkpoint."
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a child forked after the parent used OpenMP's pool would hang in its first parallel op
    try: return _kill_loop(ck_root, kills, rng, save, load)
    finally: torch.set_num_threads(threads)

def _kill_loop(ck_root, kills, rng, save, load) -> dict:
    t0 = time.perf_counter(); pid = os.fork()
    if pid == 0:
        try: save(0, once=True)
        finally: os._exit(0)
    os.waitpid(pid, 0)
    save_s = time.perf_counter() - t0  # a fork and one save: what the first save of a child costs
    out = {"loads": 0, "corrupt": 0, "torn_temporaries": 0, "steps": [], "save_ms": round(save_s * 1e3, 1)}
    first = 1
    for _ in range(kills):
        pid = os.fork()
        if pid == 0:  # the child never returns: it is killed in the middle of some save
            try: save(first)
            finally: os._exit(1)
        time.sleep(rng.uniform(0, 3 * save_s))
        os.kill(pid, signal.SIGKILL); os.waitpid(pid, 0)
        if any(ck_root.glob(".*.tmp.*")): out["torn_temporaries"] += 1
        try:
            state, step = load()
        except Exception:
            out["corrupt"] += 1; continue
        if state is None: out["corrupt"] += 1; continue  # the checkpoint saved before the kills is gone
        out["loads"] += 1
        if not (state["step"] == step and bool((state["w"] == float(step)).all())): out["corrupt"] += 1
        out["steps"].append(step); first = step + 1000  # the next child saves newer steps
    return out


@pytest.mark.timeout(120)
def test_sigkill_during_save_never_corrupts(tmp_path):
    ck = CheckpointDir(tmp_path / "ckpt", keep=2)
    def save(first, once=False): _saver(ck, first, once)
    def load():
        state, rep = ck.load_latest()
        return state, rep.step
    r = _kill_during_saves(ck.root, 50, random.Random(0), save, load)
    assert r["corrupt"] == 0, r
    assert r["loads"] == 50, f"the latest valid checkpoint did not load after every kill: {r}"
    assert r["torn_temporaries"] >= 10, f"too few kills landed in the middle of a save to test anything: {r}"
    assert r["steps"] == sorted(r["steps"]), "a load went back to an older checkpoint than an earlier load"


@pytest.mark.timeout(60)
def test_sigkill_during_plain_torch_save_corrupts(tmp_path):
    "The control: the same kills against torch.save in place leave files that do not load (what the atomic save prevents)."
    path = tmp_path / "latest.pt"
    def save(first, once=False):
        step = first
        while True:
            torch.save({"step": step, "w": torch.full((65_536,), float(step))}, path)
            if once: return
            step += 1
    def load():
        s = torch.load(path, weights_only=True); return s, s["step"]
    r = _kill_during_saves(tmp_path, 20, random.Random(1), save, load)
    assert r["corrupt"] >= 1, f"20 kills mid-save never tore the in-place file: {r}"


def _losses(log: str, tag: str) -> dict[int, str]:
    "step -> loss (as printed) of lines `TAG step N loss X`; a step printed again (after a restart) keeps its last value."
    return {int(m.group(1)): m.group(2) for m in re.finditer(rf"^{tag} step (\d+) loss (\S+)$", log, re.M)}


@pytest.mark.timeout(240)
def test_rank_sigkilled_mid_training_resumes_bit_identical(tmp_path):
    from distlab.run.launch import launch
    from distlab.rank.events import read_events
    from distlab.contract import log_path
    run = launch(str(ROOT / "examples" / "preemptible_train.py"),
                 ["--ckpt-dir", str(tmp_path / "ckpt"), "--steps", "30", "--save-every", "4", "--reference"],
                 nproc=2, backend="gloo", max_restarts=1, runs_root=tmp_path / "runs", timeout_s=200)
    def rank1_at_step_9():
        p = log_path(run.run_dir, 1)
        return p.exists() and re.search(r"^train step 9 loss", p.read_text(), re.M)
    wait_for(rank1_at_step_9, 120, what="rank 1 to train 9 steps")
    pid = next(e["pid"] for e in read_events(run.run_dir, 1) if e["ev"] == "hello")
    os.kill(pid, signal.SIGKILL)  # no warning, no handler: the node (or the OOM killer) took it
    res = run.wait()
    assert res.status == "ok", (res.status, res.failure, res.warnings)
    assert res.restarts == 1 and res.restart_reasons, res.restart_reasons
    log = log_path(run.run_dir, 0).read_text()
    resumed, reference = _losses(log, "train"), _losses(log, "reference")
    assert len(reference) == 30 and resumed == reference, \
        f"differs at steps {[s for s in reference if resumed.get(s) != reference[s]]}"
    assert "resume: loaded step-" in log, "the restarted ranks did not say which checkpoint they resumed from"
