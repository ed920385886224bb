#!/usr/bin/env bash
# Creates .venv (once) and installs distlab with its lab and dev extras. Safe to run again.
# torch: if the venv has none, install DISTLAB_TORCH (default torch==2.13.0, the CPU wheel this project's
# machines carry on disk); a GPU user installs their own CUDA build into .venv first and it is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
pip() { .venv/bin/python -m pip --disable-pip-version-check -q "$@" 2>&1 | grep -v "^WARNING: Location" || true; }
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  pip install "${DISTLAB_TORCH:-torch==2.13.0}"
fi
pip install -e ".[lab,dev]"
.venv/bin/python -c "import torch, distlab; print(f'distlab {distlab.__version__} with torch {torch.__version__}')"
# the kernel that walkthroughs and the browser test run on: this venv's python, named python3
.venv/bin/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (distlab)" >/dev/null
