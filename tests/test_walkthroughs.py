"""Every walkthrough in examples/ runs top to bottom under papermill, and its recorded outcomes are as expected."""
import json, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
WALKTHROUGHS = sorted((ROOT / "examples").glob("*.ipynb"))


def ensure_python3_kernelspec():
    "Make sure a `python3` kernelspec exists for this interpreter (installs one into the venv if not)."
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    try: KernelSpecManager().get_kernel_spec("python3"); return
    except NoSuchKernel: pass
    subprocess.run([sys.executable, "-m", "ipykernel", "install", "--sys-prefix", "--name", "python3"], check=True)


@pytest.fixture(scope="session")
def python3_kernel():
    ensure_python3_kernelspec()


@pytest.mark.papermill
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("nb", WALKTHROUGHS, ids=[p.stem for p in WALKTHROUGHS])
def test_walkthrough(nb, tmp_path, python3_kernel):
    import papermill as pm
    results = tmp_path / "results.json"
    pm.execute_notebook(str(nb), str(tmp_path / nb.name), kernel_name="python3", cwd=str(ROOT),
                        parameters=dict(nproc=2, backend="gloo", block=True, results_path=str(results),
                                        runs_root=str(tmp_path / "runs")),
                        progress_bar=False)
    outcomes = json.loads(results.read_text())
    from distlab.scenarios import SCENARIOS
    family = {o["scenario"] for o in outcomes}
    assert family, "the walkthrough recorded no outcome"
    for sid in family:  # every scenario the walkthrough ran, both variants, as its catalogue entry expects
        s = SCENARIOS[sid]
        got = {o["variant"]: o for o in outcomes if o["scenario"] == sid}
        assert set(got) == set(s.variants), f"{sid}: ran {sorted(got)}, the catalogue has {sorted(s.variants)}"
        for variant, o in got.items():
            want = s.variants[variant].expect
            kind = (o["diagnosis"] or {}).get("kind")
            if (o["diagnosis"] or {}).get("advisory") and want.kind is None: kind = None  # advice, not a fault (see `compare`)
            assert (o["status"], kind) == (want.status, want.kind), \
                f"{sid}/{variant}: got status {o['status']} diagnosis {kind}, expected {want.status} {want.kind}; {o['problems']}"
            assert o["matched"], f"{sid}/{variant}: {o['problems']}"
    # the walkthrough covers its whole family
    fam = {SCENARIOS[sid].family for sid in family}
    assert family == {k for k, s in SCENARIOS.items() if s.family in fam}
