#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one run on a GPU machine (a lent device, or a user's own box): the launcher's
# cost over bare torchrun (a trivial NCCL job and a ~15 s training job), the watch's cost on a host-bound GPU step and
# what each piece of it costs, the `gpu` tests, the `gpu` cells of the module notebooks, the profiler's cost, real
# NCCL/CUDA error logs for the signature fixtures, and `distlab bench` on NCCL. Needs torch with CUDA, pytest,
# pytest-timeout, psutil, matplotlib, nvidia-ml-py and fastcore; distlab need not be installed (PYTHONPATH).
# Results go to $OUT (default ./gpu-check).
#     bash scripts/gpu_check.sh [STEP ...]     # default: every step; names: launcher launcher_train parts watch
#                                              #   tests cells profiler logs bench
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-check}; mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
PY=${PYTHON:-python3}
START=$SECONDS
STEPS=" ${*:-launcher launcher_train parts watch tests cells profiler logs bench} "
want() { [[ "$STEPS" == *" $1 "* ]]; }
step() { echo; echo "== $1 ($(date +%T), $((SECONDS - START)) s in)"; }
step facts
nvidia-smi -L; $PY -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.get_device_name(0))"
if want parts; then step "what each piece of the watch's per-step path costs the host (watch_parts --device cuda)"
  timeout 90 $PY benchmarks/watch_parts.py --device cuda | tee "$OUT/watch_parts.json"; fi
if want watch; then step "watch cost on a ~1 ms GPU DDP step: GPU spans sampled (default) and every one timed, against unwatched (ledger_inproc --device cuda)"
  timeout 240 $PY benchmarks/ledger_inproc.py --device cuda --rounds ${WATCH_ROUNDS:-400} | tee "$OUT/watch_gpu.json"; fi
if want tests; then step "gpu tests"  # only the files that hold some: the others import what a GPU machine may lack (papermill, playwright)
  timeout 300 $PY -m pytest -q -m gpu -p no:cacheprovider -rs --timeout 200 ${GPU_TESTS:-$(grep -l "pytest.mark.gpu" tests/test_*.py)} 2>&1 | tee "$OUT/pytest_gpu.log"; fi
if want logs; then step "real NCCL/CUDA error logs for the signature fixtures (one GPU)"
  timeout 200 $PY tests/scripts/signatures/capture.py --gpu --out "$OUT/logs" 2>&1 | tail -5; fi
if want launcher_train; then step "launcher on a ~15 s NCCL training job: bare torchrun, distlab launch, --no-watch, alternating (goal <= 1.05x and +0.5 s)"
  timeout 240 $PY benchmarks/launcher_split.py --device cuda --job train --rounds ${TRAIN_ROUNDS:-2} | tee "$OUT/launcher_train_gpu.txt"; fi
if want launcher; then step "launcher on a trivial NCCL job: bare torchrun, distlab launch, --no-watch, alternating (goal <= 1.05x and +0.5 s; 0 torch modules in the launcher)"
  timeout 200 $PY benchmarks/launcher_split.py --device cuda --rounds ${TRIVIAL_ROUNDS:-3} | tee "$OUT/launcher_gpu.txt"; fi
if want cells; then step "gpu cells of the module notebooks"
  timeout 180 $PY scripts/nb_cells.py $(grep -l '"#| gpu\\n"' nbs/*.ipynb) 2>&1 | tee "$OUT/nb_cells.log"; fi
if want profiler; then step "communication profiler's cost on a GPU DDP step (profile_inproc ledger --device cuda)"
  timeout 120 $PY benchmarks/profile_inproc.py ledger --device cuda --rounds 60 | tee "$OUT/profile_gpu.json"; fi
if want bench; then step "distlab bench on NCCL"
  timeout 90 $PY -m distlab.cli bench --op all_reduce all_gather --backend nccl --nproc 1 -e 256M --runs-root /tmp/gpu-bench 2>&1 | tee "$OUT/bench_nccl.txt"; fi
step done
