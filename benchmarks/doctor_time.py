"""`distlab doctor`'s wall time against one `import torch`, side by side in one run (target: under 5 s, and no torch import).

python benchmarks/doctor_time.py [--repeats 5]   prints medians in seconds and the ratio; writes nothing else.
"""
import argparse, json, statistics, subprocess, sys, time


def wall_s(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=False, capture_output=True)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    doctor = [sys.executable, "-m", "distlab.cli", "doctor", "--json"]
    torch = [sys.executable, "-c", "import torch"]
    d, t = [], []
    for _ in range(a.repeats):  # alternate, so both see the same machine load
        d.append(wall_s(doctor)); t.append(wall_s(torch))
    out = {"doctor_s": round(statistics.median(d), 3), "import_torch_s": round(statistics.median(t), 3),
           "doctor_over_import_torch": round(statistics.median(d) / statistics.median(t), 3), "repeats": a.repeats}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
