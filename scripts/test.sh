#!/usr/bin/env bash
# Sets up, then runs every check CI runs: notebooks/library in step, module-notebook tests, pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Debian's packages, each installed by scripts/system_tools.sh when missing (as root), each alone so that one that
# fails to install does not take the others with it:
# - chromium: the browser test drives it with Playwright (no browser download);
# - prometheus: the exporter test scrapes with a real Prometheus server (never skipped);
# - prometheus-pushgateway: the monitoring faults run a real Pushgateway (without it they are skipped, with the reason);
# - iptables: the emulated-node firewall fault filters inside a node's network namespace.
for tool in chromium prometheus prometheus-pushgateway iptables; do bash scripts/system_tools.sh "$tool"; done
for tool in chromium prometheus; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$tool is missing: install it (apt-get install $tool) to run the tests" >&2; exit 1; }
done
bash scripts/check_sync.sh
echo "== module notebooks (nbdev-test, slow cells included), $(date -u +%T) UTC"
.venv/bin/nbdev-test --flags slow
echo "== pytest, $(date -u +%T) UTC"
# the docs site is built after it (from the walkthroughs it executed) and its page test runs last; a failure of
# pytest still fails this script, after the docs steps have run
rc=0
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=30 --ignore=tests/test_docs_site.py tests "$@" || rc=$?
echo "== each walkthrough under papermill (2 ranks; 00_start_here's run times)"
cat build/executed/run_times.txt 2>/dev/null || echo "(no walkthrough ran)"
echo "== docs site (scripts/docs.sh), $(date -u +%T) UTC"
time bash scripts/docs.sh
echo "== docs site in a browser, $(date -u +%T) UTC"
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=5 tests/test_docs_site.py
exit "$rc"
