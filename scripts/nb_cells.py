"""Run a module notebook's code cells in order, in one namespace, the way `nbdev-test --flags gpu` would, on a machine
without nbdev or Jupyter (the GPU machine a session may be lent): cells flagged `slow`, `#| eval: false` and the
export cell are skipped; `#| gpu` cells run. Needs fastcore (its `test_eq` and friends).

    python scripts/nb_cells.py nbs/81_gpu.ipynb [more.ipynb ...]

Each notebook runs in a process of its own, as under nbdev-test (a cell may check that CUDA was never started).
Prints one line per notebook (ok, or the failing cell and its traceback) and exits 1 if any failed."""
import json, re, subprocess, sys, traceback
from pathlib import Path

SKIP_FLAGS = {"slow"}

def cells(path: Path):
    "(index, source) of every code cell that `nbdev-test --flags gpu` runs."
    for i, c in enumerate(json.loads(path.read_text())["cells"]):
        if c["cell_type"] != "code": continue
        src = "".join(c["source"])
        flags = set(re.findall(r"^#\|\s*(\w+)\s*$", src, re.M))
        if flags & SKIP_FLAGS or re.search(r"^#\|\s*eval:\s*false", src, re.M) or "nbdev_export()" in src: continue
        yield i, "\n".join(l for l in src.splitlines() if not l.startswith(("%", "!")))

def run(path: Path) -> bool:
    ns = {"__name__": "__main__"}
    for i, src in cells(path):
        try: exec(compile(src, f"{path.name}[cell {i}]", "exec"), ns)
        except Exception:
            print(f"FAIL {path.name} cell {i}:\n{traceback.format_exc()[-3000:]}", flush=True); return False
    print(f"ok   {path.name}", flush=True); return True

if __name__ == "__main__":
    if len(sys.argv) == 2: sys.exit(0 if run(Path(sys.argv[1])) else 1)
    sys.exit(0 if all([subprocess.run([sys.executable, __file__, p]).returncode == 0 for p in sys.argv[1:]]) else 1)
