#!/usr/bin/env bash
# Fails when nbdev-export or nbdev-clean would change a tracked file: the notebooks are the source,
# distlab/ must be their export, and notebooks are committed clean. Works on a scratch copy.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD; bin=${NBDEV_BIN:-$top/.venv/bin}; tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$tmp"
cd "$tmp"
git init -q && git add -A && git -c user.email=ci@distlab.invalid -c user.name=ci commit -qm base
"$bin/nbdev-export" >/dev/null
"$bin/nbdev-clean" >/dev/null
[ -d examples ] && "$bin/nbdev-clean" --fname examples >/dev/null
changed=$(git status --porcelain)
if [ -n "$changed" ]; then
  echo "Notebooks and library are out of step; run: .venv/bin/nbdev-export && .venv/bin/nbdev-clean && .venv/bin/nbdev-clean --fname examples"
  echo "$changed"; git --no-pager diff --stat; exit 1
fi
echo "notebooks and library in step"
