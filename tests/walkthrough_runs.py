"""One papermill run per walkthrough, shared by every test that reads its outcomes (a family's scenarios are run
once in CI: the walkthrough test checks each variant against its catalogue entry, the family's own tests read the
same runs' figures and run directories)."""
import json, os, shutil, subprocess, sys, time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
START_HERE = ROOT / "examples" / "00_start_here.ipynb"  # the syllabus: no parameters, no runs
# each walkthrough, as executed, is also kept here for the docs site (scripts/docs.sh renders it with its outputs)
EXECUTED = Path(os.environ.get("DISTLAB_EXECUTED_DIR") or ROOT / "build" / "executed")
RUN_TIMES = EXECUTED / "run_times.txt"  # each walkthrough's papermill wall time this session (scripts/test.sh prints it: 00_start_here's table)


def _has_parameters(nb: Path) -> bool:
    import json
    return any("parameters" in (c.get("metadata", {}).get("tags") or []) for c in json.loads(nb.read_text())["cells"])


WALKTHROUGHS = [p for p in sorted((ROOT / "examples").glob("*.ipynb")) if _has_parameters(p)]  # the lessons: each runs its family


def ensure_python3_kernelspec():
    "Make sure a `python3` kernelspec exists for this interpreter (installs one into the venv if not)."
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    try: KernelSpecManager().get_kernel_spec("python3"); return
    except NoSuchKernel: pass
    subprocess.run([sys.executable, "-m", "ipykernel", "install", "--sys-prefix", "--name", "python3"], check=True)


class WalkthroughRuns:
    "Runs each walkthrough (examples/STEM.ipynb) under papermill at most once per test session; a failed run fails every reader."
    def __init__(self, root: Path):
        self.root, self._done = root, {}
        RUN_TIMES.unlink(missing_ok=True)  # this session's times only

    def outcomes(self, stem: str) -> list[dict]:
        "The outcomes the walkthrough recorded (`results_path`), one dict per scenario variant it ran."
        if stem not in self._done:
            try: self._done[stem] = self._run(stem)
            except Exception as e: self._done[stem] = e
        got = self._done[stem]
        if isinstance(got, Exception): raise RuntimeError(f"walkthrough {stem} did not run to the end: {got}") from got
        return got

    def by_variant(self, stem: str) -> dict[tuple[str, str], SimpleNamespace]:
        "The same outcomes keyed by (scenario, variant), as attributes (`o.figures`, `o.run_dir`; rank keys as ints)."
        out = {}
        for o in self.outcomes(stem):
            ns = SimpleNamespace(**o)
            ns.steps_per_rank = {int(k): v for k, v in (o.get("steps_per_rank") or {}).items()}
            out[o["scenario"], o["variant"]] = ns
        return out

    def _run(self, stem: str) -> list[dict]:
        import papermill as pm
        ensure_python3_kernelspec()
        nb, out = ROOT / "examples" / f"{stem}.ipynb", self.root / stem
        out.mkdir(parents=True, exist_ok=True)
        results = out / "results.json"
        t0 = time.time()
        pm.execute_notebook(str(nb), str(out / nb.name), kernel_name="python3", cwd=str(ROOT),
                            parameters=dict(nproc=2, backend="gloo", block=True, results_path=str(results),
                                            runs_root=str(out / "runs")),
                            progress_bar=False)
        EXECUTED.mkdir(parents=True, exist_ok=True)
        with open(RUN_TIMES, "a") as f: f.write(f"{stem}: {(time.time() - t0) / 60:.1f} min, load {os.getloadavg()[0]:.1f} at its end\n")
        shutil.copy2(out / nb.name, EXECUTED / nb.name)  # only a run that went to the end: the docs show real outcomes
        return json.loads(results.read_text())
