#!/usr/bin/env bash
# Sets up, then runs every check CI runs: notebooks/library in step, module-notebook tests, pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the browser test drives Debian's chromium with Playwright (no browser download)
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium) >/dev/null
  else
    echo "chromium is missing: install it (apt-get install chromium) to run the browser test" >&2; exit 1
  fi
fi
# the exporter test scrapes with a real Prometheus server (Debian's package; never skipped)
if ! command -v prometheus >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus) >/dev/null
  else
    echo "prometheus is missing: install it (apt-get install prometheus) to run the exporter test" >&2; exit 1
  fi
fi
# the monitoring faults also run a real Pushgateway (Debian's package); where it is missing they are skipped, with the reason
if ! command -v prometheus-pushgateway >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus-pushgateway) >/dev/null \
    || echo "prometheus-pushgateway could not be installed: the monitoring faults will be skipped" >&2
fi
# the emulated-node firewall scenario filters inside a node's network namespace with iptables (Debian's package)
if ! command -v iptables >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends iptables) >/dev/null
fi
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
