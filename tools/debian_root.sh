#!/usr/bin/env bash
# The Debian 13 (trixie) root that the TFX 1.21 / Python 3.13 line runs in.
#
# TFX 1.21's ML Metadata and TFDV ship only manylinux_2_39 wheels, and these machines are
# Debian 12 (glibc 2.36); trixie has glibc 2.41 and Python 3.13 (issue 46). The root is built
# once per machine and cached; every command then runs in it with the checkout mounted at the
# same path, so paths printed inside mean the same thing outside.
#
#   tools/debian_root.sh build          build the root, or check that the cached one is complete
#   tools/debian_root.sh run CMD...     run CMD in the root, in the checkout (builds it first)
#   tools/debian_root.sh path           print where the root lives
#
# Needs root (debootstrap, chroot, mount namespaces) and `debootstrap` on the host
# (`apt-get install -y debootstrap`). Idempotent: each stage records a stamp and is skipped when
# its stamp is present; an interrupted debootstrap leaves only a *.partial folder, removed on
# the next build.
set -euo pipefail

CHECKOUT=$(cd "$(dirname "$0")/.." && pwd)
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/asynctrain"
ROOT="$CACHE/debian-trixie"
SUITE=trixie
# What the 1.21 line needs besides minbase: python3 and venv for the interpreter, the CA store
# for pip's TLS, g++ and python3-dev to build pyfarmhash (no cp313 wheel), git for the tests that
# run a checkout, make for `make` inside, procps for `ps` in the cluster tests, Java and Maven for
# the local Spark cluster's tests (trixie has no OpenJDK 17; Spark 3.5 runs on 21), Go for the
# emulated cluster's Toxiproxy (`go install` from the Go module proxy on first use).
PACKAGES="g++ python3-dev git make procps openjdk-21-jre-headless maven golang-go"
STAMP_BASE=.asynctrain-debootstrap
STAMP_PACKAGES=.asynctrain-packages

say() { echo "debian_root: $*" >&2; }
die() { say "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot and mount namespaces); run it as root"

# Each command's /tmp: a fresh folder on the host's disk, removed when the command succeeds (or,
# if it was killed, by the next command). A failed command's is kept for its logs, at
# $TMP_ROOT/failed.PID (said on stderr), until the next command starts. Not a tmpfs: the suite writes gigabytes there (5.6 GB of
# pytest's folders alone in one 1.16 run), which a tmpfs holds in memory until it fills.
TMP_ROOT="$CACHE/tmp"

# A command run in the root: its own mount namespace (mounts vanish with it), /proc, /dev, /sys,
# a fresh /tmp, the host's resolver and names, and the checkout at the same path.
in_root() {
  local dir=$1; shift
  mkdir -p "$TMP_ROOT"
  ${EXEC:-} unshare -m -- /bin/sh -euc '
    dir=$1; checkout=$2; tmp_root=$3; shift 3
    for old in "$tmp_root"/run.* "$tmp_root"/failed.*; do
      [ -d "$old" ] || continue
      case "$old" in
        */failed.*) rm -rf "$old" ;;
        *) kill -0 "${old##*.}" 2>/dev/null || rm -rf "$old" ;;
      esac
    done
    tmp="$tmp_root/run.$$"
    mkdir -m 1777 "$tmp"
    # The root a mount point of its own: a task of `run --compiled` makes the mounts of its pod in a
    # private namespace (mount / MS_PRIVATE), which the kernel refuses (EINVAL) on a plain folder.
    mount --bind "$dir" "$dir"
    mount -t proc proc "$dir/proc"
    mount --rbind /dev "$dir/dev"
    mount --rbind /sys "$dir/sys"
    mount --bind "$tmp" "$dir/tmp"
    # The host network, so the host resolver and names: Java resolves the machine name
    # (InetAddress.getLocalHost, as every Spark daemon starts) from /etc/hosts.
    for file in resolv.conf hosts hostname; do
      touch "$dir/etc/$file"
      mount --bind "/etc/$file" "$dir/etc/$file"
    done
    mkdir -p "$dir$checkout"
    mount --bind "$checkout" "$dir$checkout"
    cd "$dir$checkout"
    status=0
    chroot "$dir" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
      SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      /bin/sh -c "cd \"\$0\" && exec \"\$@\"" "$checkout" "$@" || status=$?
    # A checkout under /tmp (`git clone . "$(mktemp -d)"`) is mounted on a folder of the /tmp of
    # the root, that is of "$tmp": detached first, its mount point is an empty folder that rm
    # removes (rm never crosses it: the mount is seen through "$dir/tmp" only; rmdir fails EBUSY).
    umount -l "$dir$checkout" 2>/dev/null || :
    if [ "$status" = 0 ]; then
      rm -rf "$tmp"
    else
      mv "$tmp" "$tmp_root/failed.$$"
      echo "debian_root: exit status $status; its /tmp is kept at $tmp_root/failed.$$" >&2
    fi
    exit "$status"
  ' in_root "$dir" "$CHECKOUT" "$TMP_ROOT" "$@"
}

build_base() {
  if [ -f "$ROOT/$STAMP_BASE" ]; then return 0; fi
  command -v debootstrap >/dev/null 2>&1 \
    || die "debootstrap is not installed on this machine: apt-get install -y debootstrap"
  local partial="$ROOT.partial"
  rm -rf "$partial" "$ROOT"
  mkdir -p "$CACHE"
  say "building a Debian 13 ($SUITE) root in $ROOT (about 5 min, once per machine)"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    "$SUITE" "$partial" http://deb.debian.org/debian >"$CACHE/debootstrap.log" 2>&1 \
    || die "debootstrap failed; its log: $CACHE/debootstrap.log"
  date -u +%FT%TZ >"$partial/$STAMP_BASE"
  mv "$partial" "$ROOT"
}

# The CA certificates this host added locally (a proxy's, say): without them pip fails on a
# self-signed certificate in the chain. Copied at every build so a changed one is picked up.
sync_certificates() {
  local src=/usr/local/share/ca-certificates dst="$ROOT/usr/local/share/ca-certificates"
  mkdir -p "$dst"
  if [ -d "$src" ] && ! diff -qr "$src" "$dst" >/dev/null 2>&1; then
    say "copying the host's local CA certificates into the root"
    rm -rf "$dst"; cp -r "$src" "$dst"
    in_root "$ROOT" update-ca-certificates --fresh >"$CACHE/certificates.log" 2>&1 \
      || die "update-ca-certificates in the root failed; its log: $CACHE/certificates.log"
  fi
}

install_packages() {
  if [ -f "$ROOT/$STAMP_PACKAGES" ] && [ "$(cat "$ROOT/$STAMP_PACKAGES")" = "$PACKAGES" ]; then
    return 0
  fi
  say "installing $PACKAGES in the root"
  in_root "$ROOT" sh -c "export DEBIAN_FRONTEND=noninteractive; apt-get update -q && apt-get install -y -q --no-install-recommends $PACKAGES && apt-get clean" \
    >"$CACHE/packages.log" 2>&1 || die "apt-get in the root failed; its log: $CACHE/packages.log"
  echo "$PACKAGES" >"$ROOT/$STAMP_PACKAGES"
}

build() {
  build_base
  sync_certificates
  install_packages
  say "root ready: $ROOT ($(in_root "$ROOT" python3 --version), glibc $(in_root "$ROOT" getconf GNU_LIBC_VERSION | cut -d' ' -f2))"
}

case "${1:-}" in
  build) build ;;
  run)
    shift
    [ $# -gt 0 ] || die "run needs a command, e.g. tools/debian_root.sh run python3 --version"
    build
    # exec: the command's exit status is this script's, and a crash is reported by the shell
    # that ran this script, in one line, not with the text of in_root.
    EXEC=exec in_root "$ROOT" "$@"
    ;;
  path) echo "$ROOT" ;;
  *) die "usage: $0 build | run CMD... | path" ;;
esac
