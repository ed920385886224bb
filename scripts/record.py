"""Record scenarios' broken and fixed runs on real ranks into recordings/<scenario>/<variant>/ (what `distlab.ui.replay`
replays with no rank started, and what ships in the wheel as distlab/recordings/).

    .venv/bin/python scripts/record.py --family hangs          # every scenario of the family, broken and fixed
    .venv/bin/python scripts/record.py --only uneven-batches   # one scenario (or several ids)
    .venv/bin/python scripts/record.py --family hangs --missing   # only the family's scenarios not recorded yet

Each run is world 2 on gloo (as CI's walkthroughs run), in a temporary runs folder removed afterwards. A run that
does not do what its variant expects is not recorded (the old recording stays) and the script exits 1.
Re-running replaces a scenario's recordings; it prints each one's size and the total.
"""
import argparse, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", help="record every scenario of this family (e.g. hangs)")
    ap.add_argument("--only", nargs="+", metavar="ID", default=[], help="record these scenario ids")
    ap.add_argument("--missing", action="store_true", help="skip scenarios that already have a recording of every variant asked for")
    ap.add_argument("--variants", nargs="+", default=["broken", "fixed"], help="variants to record (default: broken fixed)")
    ap.add_argument("--nproc", type=int, default=2, help="ranks per run (default 2, as CI's walkthroughs)")
    ap.add_argument("--backend", default="gloo", help="gloo (default) or nccl")
    ap.add_argument("--out", type=Path, default=ROOT / "recordings", help="recordings folder (default: recordings/ of this checkout)")
    a = ap.parse_args(argv)
    from distlab.scenarios import SCENARIOS
    from distlab.scenarios.runner import run_scenario
    from distlab.ui.replay import save_recording, recordings, recording_facts
    if not a.family and not a.only: ap.error("say what to record: --family FAMILY and/or --only ID ...")
    ids = [i for i, s in SCENARIOS.items() if a.family and s.family == a.family] + [i for i in a.only]
    ids = list(dict.fromkeys(ids))
    if not ids: ap.error(f"--family {a.family}: no scenario has it; families: {sorted({s.family for s in SCENARIOS.values()})}")
    unknown = [i for i in ids if i not in SCENARIOS]
    if unknown: ap.error(f"unknown scenario ids {unknown}; see `distlab list`")
    if a.missing and a.out.is_dir():
        have = set(recordings(a.out))
        ids = [i for i in ids if not all((i, v) in have for v in a.variants if v in SCENARIOS[i].variants)]
        print(f"not recorded yet: {ids or 'none'}", flush=True)
    failed = []
    with tempfile.TemporaryDirectory(prefix="distlab-record-") as runs_root:
        for sid in ids:
            for variant in a.variants:
                if variant not in SCENARIOS[sid].variants:
                    print(f"{sid} / {variant}: no such variant, skipped", flush=True); continue
                t0 = time.time()
                o = run_scenario(sid, variant, nproc=a.nproc, backend=a.backend, runs_root=runs_root).to_dict()
                took = time.time() - t0
                if not o["matched"]:
                    failed.append((sid, variant))
                    print(f"{sid} / {variant}: NOT recorded, the run did not do what it should ({o['status']}): "
                          f"{'; '.join(o['problems'])} ({took:.0f} s)", flush=True); continue
                dest = save_recording(o, root=a.out)
                print(f"{sid} / {variant}: {o['status']}, {recording_facts(o)}, {tree_bytes(dest)} B in "
                      f"{dest.relative_to(a.out)} ({took:.0f} s)", flush=True)
    if a.out.is_dir():
        stale = [f"{s}/{v}" for s, v in recordings(a.out) if s not in SCENARIOS]
        if stale: print(f"recordings of scenarios no longer in the catalogue (remove them): {stale}")
        print(f"all recordings: {len(recordings(a.out))} runs, {tree_bytes(a.out)} B in {a.out}")
    if failed: print(f"not recorded: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
