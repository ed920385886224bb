"""Matching a long log against distlab.watch.signatures: the one-pass matcher beside the naive loop (every pattern
of every signature against every line), side by side in one run.

    python benchmarks/signatures.py [--lines 10000] [--repeats 5]

The log is the usual shape: thousands of healthy step lines (tests/fixtures/logs/healthy.txt, repeated), then a
real traceback (tests/fixtures/logs/ddp-unused-parameters.txt) at the end. Prints one JSON object."""
import argparse, json, re, statistics, sys, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from distlab.watch.signatures import SIGNATURES, match_signatures  # noqa: E402

LOGS = HERE.parent / "tests" / "fixtures" / "logs"

def naive_ids(text: str) -> list[str]:
    "Every pattern of every signature against every line; ids in order of first appearance."
    rxs, out = [(s.id, [re.compile(p, re.I) for p in s.patterns]) for s in SIGNATURES.values()], []
    for line in text.splitlines():
        for sid, ps in rxs:
            if sid not in out and any(p.search(line) for p in ps): out.append(sid)
    return out

def best_ms(f, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter(); f(); out.append(round((time.perf_counter() - t0) * 1e3, 2))
    return out

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    healthy = [l for l in (LOGS / "healthy.txt").read_text().splitlines()[1:] if l.strip()]
    tail = (LOGS / "ddp-unused-parameters.txt").read_text()
    text = "\n".join(healthy[i % len(healthy)] for i in range(a.lines - tail.count("\n"))) + "\n" + tail
    match_signatures(text)   # compile once, as every later call finds it compiled
    assert [m.id for m in match_signatures(text)] == naive_ids(text) == ["ddp-unused-parameters"]
    fast, naive = best_ms(lambda: match_signatures(text), a.repeats), best_ms(lambda: naive_ids(text), a.repeats)
    print(json.dumps({"lines": text.count("\n") + 1, "bytes": len(text), "signatures": len(SIGNATURES),
                      "one_pass_ms": statistics.median(fast), "naive_ms": statistics.median(naive),
                      "naive_over_one_pass": round(statistics.median(naive) / statistics.median(fast), 1),
                      "samples": {"one_pass_ms": fast, "naive_ms": naive}}))

if __name__ == "__main__": main()
