#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one run on a GPU machine (a lent device, or a user's own box): the launcher's
# cost over bare torchrun on a trivial NCCL job, the `gpu` tests, the `gpu` cells of the module notebooks, the watch's
# and the profiler's cost on a host-bound GPU step, and `distlab bench` on NCCL. Needs torch with CUDA, pytest,
# pytest-timeout, psutil, matplotlib, nvidia-ml-py and fastcore; distlab need not be installed (PYTHONPATH). Results go to $OUT (default ./gpu-check).
#     bash scripts/gpu_check.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-check}; mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
PY=${PYTHON:-python3}
START=$SECONDS
step() { echo; echo "== $1 ($(date +%T), $((SECONDS - START)) s in)"; }
step facts
nvidia-smi -L; $PY -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.get_device_name(0))"
step "launcher on a trivial NCCL job: bare torchrun, distlab launch, --no-watch, alternating (goal <= 1.05x and +0.5 s; 0 torch modules in the launcher)"
timeout 150 $PY benchmarks/launcher_split.py --device cuda --rounds 3 | tee "$OUT/launcher_gpu.txt"
step "watch cost on a ~1 ms GPU DDP step (ledger_inproc --device cuda, 600 rounds: its median at +-0.5 %)"
timeout 240 $PY benchmarks/ledger_inproc.py --device cuda --rounds 600 | tee "$OUT/watch_gpu.json"
step "gpu tests"  # only the files that hold some: the others import what a GPU machine may lack (papermill, playwright)
timeout 300 $PY -m pytest -q -m gpu -p no:cacheprovider -rs --timeout 200 $(grep -l "pytest.mark.gpu" tests/test_*.py) 2>&1 | tee "$OUT/pytest_gpu.log"
step "gpu cells of the module notebooks"
timeout 180 $PY scripts/nb_cells.py $(grep -l '"#| gpu\\n"' nbs/*.ipynb) 2>&1 | tee "$OUT/nb_cells.log"
step "communication profiler's cost on a GPU DDP step (profile_inproc ledger --device cuda)"
timeout 120 $PY benchmarks/profile_inproc.py ledger --device cuda --rounds 60 | tee "$OUT/profile_gpu.json"
step "distlab bench on NCCL"
timeout 90 $PY -m distlab.cli bench --op all_reduce all_gather --backend nccl --nproc 1 -e 256M --runs-root /tmp/gpu-bench 2>&1 | tee "$OUT/bench_nccl.txt"
step done
