#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one run on a GPU machine (a lent device, or a user's own box): the memory
# family's GPU budgets measured and its lessons run at world 1, the `gpu` tests, the launcher's cost over bare
# torchrun (a trivial NCCL job and a ~15 s training job), the watch's cost on a host-bound GPU step and what each
# piece of it costs, real NCCL/CUDA error logs for the signature fixtures, the `gpu` cells of the module notebooks,
# the profiler's cost, and `distlab bench` on NCCL. Needs torch with CUDA, pytest, pytest-timeout, psutil, matplotlib,
# nvidia-ml-py and fastcore; distlab need not be installed (PYTHONPATH). Results go to $OUT (default ./gpu-check).
#     bash scripts/gpu_check.sh [STEP ...]     # in the order given; default: every step, most wanted first:
#                                              #   budgets tests launcher watch launcher_train logs cells parts profiler bench
# GPU_CHECK_DEADLINE_S (default 360): a step that would run past it gets only the time left, or is skipped with a line.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-check}; mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
PY=${PYTHON:-python3}
START=$SECONDS DEADLINE=${GPU_CHECK_DEADLINE_S:-360}
STEPS=${*:-budgets tests launcher watch launcher_train logs cells parts profiler bench}
step() { echo; echo "== $1 ($(date +%T), $((SECONDS - START)) s in)"; }
limit() {  # the seconds step $1 may take: its own limit $2, or what is left before the deadline (0: skip it)
  local left=$((DEADLINE - (SECONDS - START)))
  if ((left < 20)); then echo "== $1: skipped, $((SECONDS - START)) s in, past GPU_CHECK_DEADLINE_S=$DEADLINE" >&2; echo 0
  elif ((left < $2)); then echo "$left"; else echo "$2"; fi
}
step facts
nvidia-smi -L; $PY -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.get_device_name(0))"
for s in $STEPS; do
  case $s in
    budgets) T=$(limit $s 180); ((T)) || continue
      step "the memory family on one GPU: each script's need, then the scenarios at their GPU budgets (gpu_memory_budgets)"
      timeout $T $PY benchmarks/gpu_memory_budgets.py --json "$OUT/gpu_budgets.json" 2>&1 | grep -v '^{"device"' ;;
    tests) T=$(limit $s 240); ((T)) || continue
      step "gpu tests"  # only the files that hold some: the others import what a GPU machine may lack (papermill, playwright)
      timeout $T $PY -m pytest -q -m gpu -p no:cacheprovider -rs --durations=8 --timeout 200 ${GPU_TESTS:-$(grep -l "pytest.mark.gpu" tests/test_*.py)} 2>&1 | tee "$OUT/pytest_gpu.log" ;;
    launcher) T=$(limit $s 100); ((T)) || continue
      step "launcher on a trivial NCCL job: bare torchrun, distlab launch, --no-watch, alternating (goal <= 1.05x and +0.5 s; 0 torch modules in the launcher)"
      timeout $T $PY benchmarks/launcher_split.py --device cuda --rounds ${TRIVIAL_ROUNDS:-3} | tee "$OUT/launcher_gpu.txt" ;;
    watch) T=$(limit $s 120); ((T)) || continue
      step "watch cost on a ~1 ms GPU DDP step: GPU spans sampled (default) and every one timed, against unwatched (ledger_inproc --device cuda)"
      timeout $T $PY benchmarks/ledger_inproc.py --device cuda --rounds ${WATCH_ROUNDS:-400} | tee "$OUT/watch_gpu.json" ;;
    launcher_train) T=$(limit $s 200); ((T)) || continue
      step "launcher on a ~15 s NCCL training job: bare torchrun, distlab launch, --no-watch, and launch without the health sampler / the timed GPU spans, alternating (goal <= 1.05x and +0.5 s)"
      timeout $T $PY benchmarks/launcher_split.py --device cuda --job train --split --rounds ${TRAIN_ROUNDS:-2} | tee "$OUT/launcher_train_gpu.txt" ;;
    logs) T=$(limit $s 120); ((T)) || continue
      step "real NCCL/CUDA error logs for the signature fixtures (one GPU)"
      timeout $T $PY tests/scripts/signatures/capture.py --gpu --out "$OUT/logs" 2>&1 | tail -8 ;;
    cells) T=$(limit $s 120); ((T)) || continue
      step "gpu cells of the module notebooks"
      timeout $T $PY scripts/nb_cells.py $(grep -l '"#| gpu\\n"' nbs/*.ipynb) 2>&1 | tee "$OUT/nb_cells.log" ;;
    parts) T=$(limit $s 90); ((T)) || continue
      step "what each piece of the watch's per-step path costs the host (watch_parts --device cuda)"
      timeout $T $PY benchmarks/watch_parts.py --device cuda | tee "$OUT/watch_parts.json" ;;
    profiler) T=$(limit $s 120); ((T)) || continue
      step "communication profiler's cost on a GPU DDP step (profile_inproc ledger --device cuda)"
      timeout $T $PY benchmarks/profile_inproc.py ledger --device cuda --rounds 60 | tee "$OUT/profile_gpu.json" ;;
    bench) T=$(limit $s 90); ((T)) || continue
      step "distlab bench on NCCL"
      timeout $T $PY -m distlab.cli bench --op all_reduce all_gather --backend nccl --nproc 1 -e 256M --runs-root /tmp/gpu-bench 2>&1 | tee "$OUT/bench_nccl.txt" ;;
    *) echo "gpu_check.sh: no step $s; the steps: budgets tests launcher watch launcher_train logs cells parts profiler bench" >&2; exit 2 ;;
  esac
done
step done
