#!/usr/bin/env bash
# Creates .venv from requirements.lock with a Python 3.10 interpreter.
#
# Idempotent: when .venv already matches the lock (its hash is recorded in .venv/.lock.sha256),
# it does nothing. TFX 1.16 supports Python 3.9-3.10 only, so 3.10 is required.
set -euo pipefail
cd "$(dirname "$0")/.."

. tools/venv_from_lock.sh
VENV=.venv
LOCK=requirements.lock
if lock_stamp_current "$VENV" "$LOCK" "$0"; then
  exit 0
fi

find_python310() {
  local candidate
  if command -v python3.10 >/dev/null 2>&1 && python3.10 -c 'import sys; assert sys.version_info[:2] == (3, 10)' 2>/dev/null; then
    command -v python3.10; return 0
  fi
  local root="${PYENV_ROOT:-}"
  if [ -z "$root" ] && command -v pyenv >/dev/null 2>&1; then root=$(pyenv root); fi
  [ -n "$root" ] || root="$HOME/.pyenv"
  for candidate in $(ls -d "$root"/versions/3.10.* 2>/dev/null | sort -V -r); do
    if [ -x "$candidate/bin/python" ]; then echo "$candidate/bin/python"; return 0; fi
  done
  return 1
}

if ! PY=$(find_python310); then
  cat >&2 <<'MSG'
error: asynctrain needs Python 3.10 (TFX 1.16 supports 3.9-3.10 only), and none was found.
Looked for `python3.10` on PATH and for pyenv's versions/3.10.*.
Install one, for example `pyenv install 3.10` or your distribution's python3.10 package
(with its venv module), then run this again.
MSG
  exit 1
fi
venv_from_lock "$VENV" "$LOCK" "$0" "$PY" 3.10 setup
