#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Provision (or reuse) a Debian unstable root that carries the CPython
# versions Debian 12 does not package: 3.13 (newest), 3.14, 3.15, and the
# 3.14 debug build.  Idempotent: a stamp file records the package list, so
# a second run with nothing changed returns in well under a second.
#
# Usage: tools/sid-root.sh            provision / verify, print the root path
#        tools/sid-root.sh run CMD…   run CMD inside the root, with the work
#                                     tree bind-mounted at the same path
#
# Needs root (debootstrap, chroot and bind mounts).  Without root it prints
# why and exits 3, and the matrix then reports 3.14/3.15 as missing.
set -euo pipefail

CACHE=${DC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deferred-cleanup}
ROOT=$CACHE/sid-root
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PKGS="python3.13-dev python3.13-venv python3.14-dev python3.14-venv python3.14-dbg
python3.15-dev python3.15-venv g++ cmake ninja-build make git ca-certificates
python3-pytest pybind11-dev herdtools7 cbmc spin ccache"
# The stamp's version is in its file name: v2 added ccache (tools/matrix.py's
# builds inside the root go through it, with its cache in the root's
# /opt/deferred-cleanup/ccache).  A root provisioned by an older version is
# brought up to date once, in place: only the packages it lacks are installed
# (--no-upgrade, from the package lists it already has when they still serve),
# so what a concurrent run uses is not replaced.  The v1 stamp
# (.deferred-cleanup-stamp) is left as it is, so a checkout that still runs
# the v1 script keeps reusing the root instead of provisioning it again.
STAMP=$ROOT/.deferred-cleanup-stamp.v2
WANT="v2 $(echo $PKGS)"
# Provisioning holds this lock (flock): two checkouts that find the same old
# stamp take turns instead of racing for dpkg's lock; the second one then
# finds the stamp current.
LOCK=$CACHE/sid-root.lock

say() { printf '[sid-root] %s\n' "$*" >&2; }

need_root() {
  if [ "$(id -u)" != 0 ]; then
    say "not root: cannot debootstrap or chroot; 3.13 (sid), 3.14 and 3.15 stay missing"
    exit 3
  fi
}

# The mirror comes from this machine's own apt sources; no host is written
# into the repository.
mirror() {
  local m
  m=$(grep -rhoE '^(URIs:|deb)\s+[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
      | grep -vE 'security|nodesource|google' | awk '{print $2}' | grep -E '/debian/?$' | head -n1 || true)
  [ -n "$m" ] || { say "no Debian mirror found in /etc/apt/sources*"; exit 4; }
  echo "${m%/}"
}

stamp_current() { [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; }

provision() {
  need_root
  if stamp_current; then
    say "reusing $ROOT"
    return 0
  fi
  mkdir -p "$CACHE"
  exec 9>"$LOCK"
  if ! flock -n 9; then
    say "another run is provisioning $ROOT; waiting for it (lock $LOCK)"
    flock 9
  fi
  if stamp_current; then
    say "reusing $ROOT (provisioned by the run we waited for)"
    exec 9>&-
    return 0
  fi
  if ! command -v debootstrap >/dev/null; then
    say "installing debootstrap (apt-get)"
    apt-get install -y -q debootstrap >&2 || { apt-get update -q >&2 || true; apt-get install -y -q debootstrap >&2; }
  fi
  local m; m=$(mirror)
  mkdir -p "$CACHE"
  if [ ! -x "$ROOT/usr/bin/apt-get" ]; then
    say "debootstrap --variant=minbase sid into $ROOT (about a minute)"
    rm -rf "$ROOT"
    debootstrap --variant=minbase --no-check-gpg sid "$ROOT" "$m" >&2 \
      || { say "debootstrap failed"; exit 5; }
  fi
  echo "deb $m sid main" > "$ROOT/etc/apt/sources.list"
  # The archive's Release file is past its Valid-Until date.
  echo 'Acquire::Check-Valid-Until "false";' > "$ROOT/etc/apt/apt.conf.d/99no-valid-until"
  say "apt-get install in the root (about a minute, ~1.5 GB): $(echo $PKGS)"
  # Finish any configuration an interrupted earlier run left undone.
  in_root_raw env DEBIAN_FRONTEND=noninteractive dpkg --configure -a >&2 || true
  # --no-upgrade: a package already installed is kept as it is (an old root
  # only gains what its stamp lacks); a new root gets everything.  An old
  # root first tries its own package lists (the versions it was made from);
  # only when they no longer serve are they updated.
  local install="env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends --no-upgrade"
  if compgen -G "$ROOT/.deferred-cleanup-stamp*" >/dev/null && in_root_raw $install $PKGS >&2; then
    :
  else
    in_root_raw env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
    in_root_raw $install $PKGS >&2
  fi
  echo "$WANT" > "$STAMP"
  exec 9>&-
  say "ready: $ROOT"
}

# Run a command inside the root in a private mount namespace, so nothing
# stays mounted afterwards even if the command is killed.
in_root_raw() {
  unshare --mount --propagation private -- bash -c '
    set -e
    R=$1; W=$2; shift 2
    mount --rbind /proc "$R/proc"; mount --rbind /sys "$R/sys"; mount --rbind /dev "$R/dev"
    cp -L /etc/resolv.conf "$R/etc/resolv.conf" 2>/dev/null || true
    # Trust what the host trusts (a site proxy may sign with its own CA): a
    # copy of the host'"'"'s bundle beside the root'"'"'s own, named by the usual
    # variables.  Never mounted over the root'"'"'s bundle, which ca-certificates
    # rewrites when it is configured.
    if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
      mkdir -p "$R/etc/ssl"; cp -L /etc/ssl/certs/ca-certificates.crt "$R/etc/ssl/host-ca-certificates.crt"
      export PIP_CERT=/etc/ssl/host-ca-certificates.crt SSL_CERT_FILE=/etc/ssl/host-ca-certificates.crt \
             REQUESTS_CA_BUNDLE=/etc/ssl/host-ca-certificates.crt CURL_CA_BUNDLE=/etc/ssl/host-ca-certificates.crt
      unset SSL_CERT_DIR
    fi
    mkdir -p "$R$W" "$R/tmp"; mount --bind "$W" "$R$W"
    # The CUDA toolkit headers (cuda.h) are taken from the host, read-only,
    # at the same path, so CMake finds the same CUDAToolkit inside the root.
    for c in /usr/local/cuda /usr/local/cuda-*; do
      [ -d "$c" ] || continue
      mkdir -p "$R$c"; mount --bind "$c" "$R$c"; mount -o remount,ro,bind "$R$c" 2>/dev/null || true
    done
    cd "$R$W"; exec chroot "$R" bash -c "cd \"$W\" && exec \"\$@\"" _ "$@"
  ' _ "$ROOT" "${DC_WORKDIR:-$REPO}" "$@"
}

case "${1:-}" in
  run) shift; need_root; [ -f "$STAMP" ] || provision; in_root_raw "$@" ;;
  path) echo "$ROOT" ;;
  *) provision; echo "$ROOT" ;;
esac
