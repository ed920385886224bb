"""OOMBackoff across real DDP ranks: one rank's real allocation failure makes every rank back off together."""
import json
from pathlib import Path
import pytest
from distlab.run.launch import launch

SCRIPT = Path(__file__).parent / "scripts" / "oom_backoff_ranks.py"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_one_rank_ooms_and_every_rank_backs_off_in_step(tmp_path):
    lines = []
    run = launch(str(SCRIPT), nproc=2, backend="gloo", runs_root=tmp_path, timeout_s=240,
                 env={"MALLOC_MMAP_THRESHOLD_": "131072"}, on_line=lambda r, s, l: lines.append(l))
    res = run.wait()
    assert res.status == "ok", (res.failure, res.diagnosis and res.diagnosis.text())
    got = {d["rank"]: d for d in (json.loads(l.split("RESULT ", 1)[1]) for l in lines if "RESULT " in l)}
    assert set(got) == {0, 1}, lines[-20:]
    assert got[0]["micro"] == got[1]["micro"] and got[0]["micro"][0] < 32768, got  # both ranks halved, together
    assert got[0]["backoffs"] == got[1]["backoffs"] and got[0]["backoffs"][0] == [32768, 16384], got
    assert any("can't allocate memory" in (e or "") for e in got[1]["errors"]), got[1]  # the limited rank's real error
    assert all(e is None for e in got[0]["errors"]), got[0]  # rank 0 backed off because rank 1 ran out
    assert abs(got[0]["checksum"] - got[1]["checksum"]) < 1e-6 * max(1.0, abs(got[0]["checksum"])), got  # still in step


def test_the_growth_detector_counts_shared_memory_tensors_it_holds_and_not_those_it_lets_go():
    "Batches from DataLoader workers live in shared memory, outside malloc: keeping one per step is a leak the detector must see."
    import torch
    from distlab.rank.memory import MIB
    from distlab.train.memory_guards import MemoryGrowthDetector
    for keep in (True, False):
        detector, kept = MemoryGrowthDetector(), []
        for step in range(12):
            batch = torch.ones(2 * MIB // 4).share_memory_()  # 2 MiB in shared memory, as a worker's batch arrives
            if keep: kept.append(batch)
            detector.observe(step)
        assert detector.reads == "held"
        if keep: assert detector.found is not None and detector.found.bytes_per_step >= 1.5 * MIB, detector.history
        else: assert detector.found is None, detector.history
        del kept
