#!/usr/bin/env bash
# The main job: set up, then run every scenario broken and fixed on CPU ranks (distlab tour).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the monitoring faults run Debian's prometheus and prometheus-pushgateway, the node firewall fault its iptables:
# installed here when missing (as root); without them those rows of the tour are `not run` lines, with the reason
for tool in prometheus prometheus-pushgateway iptables; do bash scripts/system_tools.sh "$tool"; done
exec .venv/bin/distlab tour "$@"
