#!/usr/bin/env bash
# Installs the Debian packages named on the command line whose command of the same name is missing (chromium,
# prometheus, prometheus-pushgateway, iptables), with apt-get, as root. Elsewhere, or when apt-get fails, it says
# what is missing and still exits 0: each caller decides what it cannot do without.
#     bash scripts/system_tools.sh prometheus prometheus-pushgateway
set -uo pipefail
missing=()
for tool in "$@"; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  recommends=--no-install-recommends
  [[ " ${missing[*]} " == *" chromium "* ]] && recommends=  # the browser comes with the fonts it recommends
  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $recommends "${missing[@]}") >/dev/null \
    || echo "apt-get could not install: ${missing[*]}" >&2
else
  echo "missing: ${missing[*]} (as root: apt-get install ${missing[*]})" >&2
fi
exit 0
