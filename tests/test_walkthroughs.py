"""Every walkthrough in examples/ runs top to bottom under papermill, and its recorded outcomes are as expected.
Without root a scenario that needs it is recorded as not run, with the reason, and the others are still graded; as
root (or with CAP_SYS_ADMIN) a scenario recorded as not run fails the test."""
import os

import pytest

from walkthrough_runs import WALKTHROUGHS


@pytest.mark.papermill
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("nb", WALKTHROUGHS, ids=[p.stem for p in WALKTHROUGHS])
def test_walkthrough(nb, walkthroughs):
    outcomes = walkthroughs.outcomes(nb.stem)
    whole = [o["not_run"] for o in outcomes if o.get("not_run") and o["scenario"] is None]  # 07_multi_node: no node without root
    if whole:
        from distlab.run.nodes import missing_privileges
        assert missing_privileges(), f"{nb.stem} ran none of its runs where it could have: {whole[0]}"
        pytest.skip(f"{nb.stem} ran to its end without its runs: {whole[0]}")
    from distlab.scenarios import SCENARIOS
    from distlab.scenarios.runner import not_run_reason
    for o in (o for o in outcomes if o.get("not_run")):  # passed over: only where this process lacks what the scenario needs
        why = not_run_reason(SCENARIOS[o["scenario"]], o["nproc"], variant=o["variant"])
        assert why is not None, f"{o['scenario']}/{o['variant']} was not run, where this process (uid {os.getuid()}) can run it: {o['not_run']}"
        assert o["not_run"] == why and why.startswith("not run: ") and o["run_dir"] is None, (o["not_run"], why)
    from distlab.scenarios.on_nodes import NODE_FAULTS
    for o in (o for o in outcomes if o["scenario"] in NODE_FAULTS):  # faults of the nodes' setup (07_multi_node): not in the catalogue
        kind, want = (o["diagnosis"] or {}).get("kind"), NODE_FAULTS[o["scenario"]].kind
        assert kind == want if o["variant"] == "broken" else (o["status"], kind) == ("ok", None), \
            f"{o['scenario']}/{o['variant']}: got status {o['status']} diagnosis {kind}; {o['problems']}"
        assert o["matched"], f"{o['scenario']}/{o['variant']}: {o['problems']}"
    if outcomes and all(o["scenario"] in NODE_FAULTS for o in outcomes): return
    family = {o["scenario"] for o in outcomes}
    assert family, "the walkthrough recorded no outcome"
    for sid in family:  # every scenario the walkthrough ran, both variants, as its catalogue entry expects
        s = SCENARIOS[sid]
        got = {o["variant"]: o for o in outcomes if o["scenario"] == sid}
        assert set(got) == set(s.variants), f"{sid}: ran {sorted(got)}, the catalogue has {sorted(s.variants)}"
        for variant, o in got.items():
            if o.get("not_run"): continue  # checked above: passed over, for the reason this process gives
            want = s.variants[variant].expect
            kind = (o["diagnosis"] or {}).get("kind")
            if (o["diagnosis"] or {}).get("advisory") and want.kind is None: kind = None  # advice, not a fault (see `compare`)
            assert (o["status"], kind) == (want.status, want.kind), \
                f"{sid}/{variant}: got status {o['status']} diagnosis {kind}, expected {want.status} {want.kind}; {o['problems']}"
            assert o["matched"], f"{sid}/{variant}: {o['problems']}"
    # the walkthrough covers its whole family
    fam = {SCENARIOS[sid].family for sid in family}
    assert family == {k for k, s in SCENARIOS.items() if s.family in fam}


@pytest.mark.papermill
def test_start_here_runs_and_names_every_lesson(tmp_path):
    "The syllabus runs top to bottom (no ranks), and its table names every walkthrough in examples/ and no other."
    import json, re
    import papermill as pm
    from walkthrough_runs import START_HERE, ensure_python3_kernelspec
    ensure_python3_kernelspec()
    out = tmp_path / START_HERE.name
    pm.execute_notebook(str(START_HERE), str(out), kernel_name="python3", progress_bar=False)
    cells = json.loads(out.read_text())["cells"]
    text = "\n".join("".join(c["source"]) for c in cells)
    named = set(re.findall(r"`(0[1-9]_[a-z_]+)`", text))
    assert named == {p.stem for p in WALKTHROUGHS}, (sorted(named), [p.stem for p in WALKTHROUGHS])
    printed = "".join("".join(o.get("text", "")) for c in cells if c["cell_type"] == "code" for o in c.get("outputs", []))
    assert "cores:" in printed and "runs per lesson" in printed, printed
