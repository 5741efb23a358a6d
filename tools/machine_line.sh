#!/usr/bin/env bash
# Prints the newest supported line this machine can install natively: `tfx121` (TFX 1.21 /
# Python 3.13) where glibc is 2.39 or newer and python3.13 is on PATH, else `tfx116` (TFX 1.16 /
# Python 3.10). TFX 1.21's ML Metadata and TFDV ship only manylinux_2_39 wheels (docs/support.md).
#   tools/machine_line.sh           the line
#   tools/machine_line.sh --why     one sentence for people: the line and why
set -euo pipefail

glibc=$(getconf GNU_LIBC_VERSION | cut -d' ' -f2)
minor=$(echo "$glibc" | cut -d. -f2)
if [ "$minor" -ge 39 ] && command -v python3.13 >/dev/null 2>&1; then
  line=tfx121
  why="the TFX 1.21 / Python 3.13 line (glibc $glibc, python3.13 found)"
else
  line=tfx116
  if [ "$minor" -ge 39 ]; then
    need="python3.13, not found"
  else
    need="glibc 2.39, this machine has $glibc"
  fi
  why="the TFX 1.16 / Python 3.10 line (TFX 1.21 needs $need; make test-tfx121 runs 1.21 in a Debian 13 root)"
fi
if [ "${1:-}" = --why ]; then
  echo "asynctrain: $why"
else
  echo "$line"
fi
