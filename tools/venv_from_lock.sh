# Sourced by tools/setup_env.sh (TFX 1.16) and tools/setup_env_tfx121.sh (TFX 1.21): one way to
# make a line's virtual environment from its lock, idempotently.
#
#   lock_stamp_current VENV LOCK SCRIPT          true when VENV already matches LOCK (its hash,
#                                                with pyproject.toml and the scripts', is recorded
#                                                in VENV/.lock.sha256)
#   venv_from_lock VENV LOCK SCRIPT PYTHON X.Y LABEL
#                                                (re)makes VENV with PYTHON X.Y, syncs LOCK,
#                                                installs the project without dependencies,
#                                                requirements-test-only.txt into VENV/test-only
#                                                (beside site-packages, not in it) and records
#                                                the stamp

_lock_hash() {
  sha256sum "$2" pyproject.toml requirements-test-only.txt "$3" "${BASH_SOURCE[0]}" \
    | sha256sum | cut -d' ' -f1
}

lock_stamp_current() {
  [ -f "$1/.lock.sha256" ] && [ "$(cat "$1/.lock.sha256")" = "$(_lock_hash "$@")" ] \
    && [ -x "$1/bin/python" ]
}

venv_from_lock() {
  local venv=$1 lock=$2 script=$3 python=$4 version=$5 label=$6
  local major=${version%.*} minor=${version#*.}
  echo "$label: using $python ($("$python" --version 2>&1))"
  # Recreate a venv that is missing, of another Python, or left half-made by an interrupted setup.
  if [ ! -x "$venv/bin/python" ] \
     || ! "$venv/bin/python" -c "import sys; assert sys.version_info[:2] == ($major, $minor)" 2>/dev/null \
     || { [ ! -x "$venv/bin/uv" ] && ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; }; then
    rm -rf "$venv"
    "$python" -m venv "$venv"
  fi
  # uv installs the locked set in seconds; it is bootstrapped into the venv itself with pip.
  if [ ! -x "$venv/bin/uv" ]; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "uv==0.13.9"
  fi
  # Bytecode is compiled here, once: with PYTHONDONTWRITEBYTECODE=1 (set on some machines) every
  # process would otherwise recompile TensorFlow, TFX and Beam from source at each import.
  "$venv/bin/uv" pip sync --quiet --compile-bytecode --python "$venv/bin/python" "$lock"
  "$venv/bin/uv" pip install --quiet --python "$venv/bin/python" --no-deps -e .
  # Packages a test needs that the project's processes must not import (the file says why): their
  # own requirements are in the lock, so without dependencies.
  rm -rf "$venv/test-only"
  "$venv/bin/uv" pip install --quiet --python "$venv/bin/python" --no-deps \
    --target "$venv/test-only" -r requirements-test-only.txt
  _lock_hash "$venv" "$lock" "$script" > "$venv/.lock.sha256"
  echo "$label: $venv matches $lock"
}
