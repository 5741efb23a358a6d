#!/usr/bin/env bash
# Creates .venv-tfx121 from requirements-tfx121.lock with Python 3.13: the TFX 1.21 line.
#
# Runs inside the Debian 13 root (`make setup-tfx121` is `tools/debian_root.sh run` of this
# script): TFX 1.21's ML Metadata and TFDV need glibc 2.39. The 1.16 line's tools/setup_env.sh is
# the model; like it, this is idempotent (the lock's hash is recorded in .venv-tfx121/.lock.sha256).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv-tfx121
LOCK=requirements-tfx121.lock
STAMP="$VENV/.lock.sha256"
want=$(sha256sum "$LOCK" pyproject.toml "$0" | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && [ -x "$VENV/bin/python" ]; then
  exit 0
fi

PY=python3.13
if ! command -v "$PY" >/dev/null 2>&1 || [ "$(getconf GNU_LIBC_VERSION | cut -d' ' -f2 | cut -d. -f2)" -lt 39 ]; then
  echo "error: the TFX 1.21 line needs Python 3.13 and glibc >= 2.39; run this through tools/debian_root.sh (make setup-tfx121)" >&2
  exit 1
fi
echo "setup-tfx121: using $(command -v $PY) ($($PY --version 2>&1))"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sys; assert sys.version_info[:2] == (3, 13)' 2>/dev/null \
   || { [ ! -x "$VENV/bin/uv" ] && ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; }; then
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
fi
if [ ! -x "$VENV/bin/uv" ]; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "uv==0.13.9"
fi
"$VENV/bin/uv" pip sync --quiet --compile-bytecode --python "$VENV/bin/python" "$LOCK"
"$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" --no-deps -e .
echo "$want" > "$STAMP"
echo "setup-tfx121: $VENV matches $LOCK"
