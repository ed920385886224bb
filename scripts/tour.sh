#!/usr/bin/env bash
# The main job: set up, then run every scenario broken and fixed on CPU ranks (distlab tour).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/distlab tour "$@"
