"""Recorded runs (`distlab.ui.replay`): every recording fills the lab's view and plots with no process started, every
scenario of the hangs family has one per variant, and each still matches what its scenario produces now: the
same status, kind of failure, culprit ranks and collective (op and call site) as walkthrough 01's run of it, the
run CI already makes (no extra ranks)."""
import sys
import psutil, pytest
from distlab.ui.replay import recordings, recordings_dir, replay, replay_outcome, recording_facts

HANGS = "01_hangs_and_mismatches"
SPAWNS = {"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn", "os.system", "pty.spawn"}
_spawned: list[str] | None = None  # while a test watches: every process start Python audits (an audit hook stays for good)


def _audit(event, args):
    if _spawned is not None and event in SPAWNS: _spawned.append(f"{event} {args[:2]!r}"[:200])


sys.addaudithook(_audit)


def test_every_hangs_scenario_is_recorded_broken_and_fixed():
    from distlab.scenarios import SCENARIOS
    have = set(recordings())
    # a GPU-only scenario is not recorded: scripts/record.py records at world 2 on CPU, where it is not run
    missing = [sid for sid, s in SCENARIOS.items() if s.family == "hangs" and not s.needs_gpu and not {(sid, "broken"), (sid, "fixed")} <= have]
    assert not [sid for sid, s in SCENARIOS.items() if s.needs_gpu and sid in {r for r, _ in have}], "a GPU-only scenario's recording: CI cannot check it against a fresh run"
    assert not missing, f"scenarios of the hangs family with no recording: {missing}; make them: python scripts/record.py --only {' '.join(missing)}"


def test_replay_fills_the_view_from_every_recording_with_no_process_started():
    global _spawned
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    recs, _spawned = recordings(), []
    assert len(recs) >= 14, recs  # 7 hangs scenarios, broken and fixed
    try:
        for sid, variant in recs:
            m, o = replay(sid, variant), replay_outcome(sid, variant)
            assert f">{o['status']}<" in m.status.value, (sid, variant, m.status.value)
            kind = (o.get("diagnosis") or {}).get("kind")
            if kind and o["status"] != "ok": assert f"Diagnosis: {kind}" in m.diagnosis.value, (sid, variant, m.diagnosis.value[:300])
            elif o["status"] == "ok": assert "finished cleanly" in m.diagnosis.value or "advisory" in str(o.get("diagnosis")), (sid, variant)
            assert set(range(2)) <= set(m.panes) and sum(p.total for p in m.panes.values()) > 0, (sid, variant, sorted(m.panes))
            assert m.progress_img.value[:4] == b"\x89PNG" and m.timeline_img.value[:4] == b"\x89PNG", (sid, variant)
            assert "distlab-dashboard" in m.dashboard.widget.value and f"· {o['status']} ·" in m.dashboard.widget.value, (sid, variant)
            assert m.stop_button.disabled and not m._thread.is_alive() and m.run.stop() is m.result, (sid, variant)
            assert o["run_dir"] == str(recordings_dir() / sid / variant) and o["matched"], (sid, variant, o["problems"])
        # the spelling, `lab.replay(scenario, variant)`: the lab module's and a ScenarioLab's, and broken beside fixed
        from distlab.ui import lab
        assert ">hung<" in lab.replay("uneven-batches", "broken").status.value
        sl = lab.ScenarioLab(family="hangs", nproc=2)
        assert ">ok<" in sl.replay("uneven-batches", "fixed").status.value and sl.picker.value == "uneven-batches"
        side_by_side = sl.compare("uneven-batches", show=False).data
        assert side_by_side.count("distlab-compare-side") == 2 and side_by_side.count("data:image/png") == 4 and "DistributedSampler" in side_by_side
        live = replay("uneven-batches", "broken", live=True)  # played back as it happened: a thread writing files, no process
        assert live.run.poll() is None and live.wait(0.5).status == "hung" and ">hung<" in live.status.value
        live.close(); played, _ = live.run.run_dir, live.run._cleanup()
        assert not played.exists(), played
        spawned = list(_spawned)
    finally: _spawned = None
    new = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert not spawned and not new, f"replay started processes: {spawned} {[p.cmdline() for p in new]}"


def test_replay_names_what_is_missing():
    with pytest.raises(ValueError, match="scripts/record.py --only no-such-scenario"): replay("no-such-scenario")
    with pytest.raises(ValueError, match="variants recorded"): replay("uneven-batches", "fixed-nope")


@pytest.mark.slow
@pytest.mark.papermill
@pytest.mark.timeout(900)  # the first reader of walkthrough 01 runs it (every hangs scenario, broken and fixed)
def test_recordings_match_what_their_scenarios_produce_now(walkthroughs):
    runs = walkthroughs.by_variant(HANGS)
    hangs = {sid for sid, _ in runs}
    stale = {}
    for sid, variant in recordings():
        if sid not in hangs: continue  # another family's recording: its own walkthrough checks it
        fresh = runs.get((sid, variant))
        assert fresh is not None, f"walkthrough {HANGS} ran no {sid} / {variant} to compare its recording with"
        want, got = recording_facts(vars(fresh)), recording_facts(replay_outcome(sid, variant))
        if want != got: stale[f"{sid}/{variant}"] = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
    assert not stale, (f"recordings that no longer match their scenario ((recorded, now) per fact): {stale}; "
                       f"re-record them: python scripts/record.py --only {' '.join(sorted({k.split('/')[0] for k in stale}))}")
