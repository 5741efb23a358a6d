#!/usr/bin/env bash
# Creates .venv-tfx121 from requirements-tfx121.lock with Python 3.13: the TFX 1.21 line.
#
# Runs inside the Debian 13 root (`make setup-tfx121` is `tools/debian_root.sh run` of this
# script): TFX 1.21's ML Metadata and TFDV need glibc 2.39. Idempotent, as the 1.16 line's
# tools/setup_env.sh: both make their venv with tools/venv_from_lock.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

. tools/venv_from_lock.sh
VENV=.venv-tfx121
LOCK=requirements-tfx121.lock
if lock_stamp_current "$VENV" "$LOCK" "$0"; then
  exit 0
fi

if [ "$(bash tools/machine_line.sh)" != tfx121 ]; then
  echo "error: the TFX 1.21 line needs Python 3.13 and glibc >= 2.39; run this through tools/debian_root.sh (make setup-tfx121)" >&2
  exit 1
fi
venv_from_lock "$VENV" "$LOCK" "$0" "$(command -v python3.13)" 3.13 setup-tfx121
