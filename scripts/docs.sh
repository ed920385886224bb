#!/usr/bin/env bash
# Builds the documentation site into build/site: the syllabus as its index, the walkthroughs as the tests executed
# them (build/executed/, kept by tests/walkthrough_runs.py), and the module notebooks through nbdev's processors.
# Nothing is executed. `bash scripts/docs.sh serve` builds it, then serves it on http://127.0.0.1:${PORT:-8000}/.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python scripts/docs_site.py --site build/site
if [ "${1:-}" = serve ]; then
  echo "open http://127.0.0.1:${PORT:-8000}/ (Ctrl-C stops the server)"
  exec .venv/bin/python -m http.server "${PORT:-8000}" --bind 127.0.0.1 --directory build/site
fi
