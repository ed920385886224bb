"""The package's layers: each layer imports only the ones below it (ARCHITECTURE.md draws them)."""
import ast, subprocess, sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "distlab"

# layer -> the distlab layers its modules may import (besides their own)
ALLOWED = {
    "contract": set(),
    "config": set(),
    "rank": {"contract", "config"},
    "train": {"contract", "config", "rank"},
    "watch": {"contract", "config", "rank"},
    "health": {"contract", "config", "rank", "watch"},
    "run": {"contract", "config", "rank", "watch", "health"},
    "scenarios": {"contract", "config", "rank", "train"},      # the registry and the families
    "scenarios.runner": {"contract", "config", "rank", "train", "watch", "run", "scenarios", "health"},  # and scenarios.lesson
    "ui": {"contract", "config", "rank", "train", "watch", "run", "scenarios", "scenarios.runner", "health"},
    "cli": {"contract", "config", "rank", "train", "watch", "run", "scenarios", "scenarios.runner", "ui", "health"},
}

def layer_of(module: str) -> str | None:
    "`distlab.scenarios.runner` -> 'scenarios.runner', `distlab.rank.tape` -> 'rank'; None outside distlab."
    parts = module.split(".")
    if parts[0] != "distlab" or len(parts) < 2: return None
    if parts[1:3] in (["scenarios", "runner"], ["scenarios", "lesson"], ["scenarios", "on_nodes"], ["scenarios", "node_tries"],
                      ["health", "monitoring_faults"]): return "scenarios.runner"  # they run scenarios (and jobs beside real servers)
    return parts[1]

def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__": parts = parts[:-1]
    return ".".join(parts)

def _is_module(name: str) -> bool:
    rel = Path(*name.split(".")[1:])
    return (PKG / rel).with_suffix(".py").exists() or (PKG / rel / "__init__.py").exists()

def imported(path: Path) -> set[str]:
    "Every distlab module `path` imports, at its top or inside functions (relative imports resolved)."
    me = module_name(path).split(".")
    pkg = me if path.name == "__init__.py" else me[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import): out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = pkg[: len(pkg) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names if _is_module(f"{mod}.{a.name}")}  # `from distlab.rank import ledger`
    return {m for m in out if m.split(".")[0] == "distlab"}

def violations() -> list[str]:
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        me = module_name(path)
        mine = layer_of(me)
        if mine is None or mine == "_modidx": continue
        assert mine in ALLOWED, f"{me}: layer {mine!r} is not in the layer table; add it to ALLOWED and ARCHITECTURE.md"
        for m in imported(path):
            other = layer_of(m)
            if other in (None, mine, "_modidx") or (other == "scenarios" and m.count(".") > 1 and mine == "scenarios.runner"): continue
            if other not in ALLOWED[mine]: bad.append(f"{me} imports {m} ({mine} -> {other})")
    return bad

def test_every_module_imports_only_the_layers_below_it():
    assert violations() == []

def test_the_check_catches_a_rank_module_importing_the_launcher(tmp_path, monkeypatch):
    fake = PKG / "rank" / "_layer_probe.py"
    fake.write_text("from ..run.launch import launch\n")
    try: assert violations() == ["distlab.rank._layer_probe imports distlab.run.launch (rank -> run)"]
    finally: fake.unlink()

def test_a_rank_loads_nothing_of_the_launcher_watcher_or_ui():
    code = ("import sys, distlab.rank.shim, distlab.rank.ledger, distlab.rank.worker, distlab.scenarios.hangs\n"
            "print(sorted(m for m in sys.modules if m.startswith(('distlab.run', 'distlab.watch', 'distlab.ui', 'distlab.scenarios.runner'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
