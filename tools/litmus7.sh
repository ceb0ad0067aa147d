#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run C11 store-buffering litmus tests on this machine's CPU with herdtools7's
# litmus7 (which compiles each test to a C program with C11 atomics and runs
# it many times), and ask herd7 for the RC11 verdict of the same file.
# Runs inside the Debian unstable root, where herdtools7 and gcc live
# (tools/sid-root.sh); writes build/litmus7/<test>/run.out and prints a summary
# line per test:  <test> rc11=<Allowed|Forbidden> observed=<k>/<n>
#
# Usage: tools/litmus7.sh [-r RUNS] [-s SIZE] FILE.litmus...
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
RUNS=10 SIZE=100000
while getopts r:s: o; do case $o in r) RUNS=$OPTARG ;; s) SIZE=$OPTARG ;; *) exit 2 ;; esac; done
shift $((OPTIND - 1))
if ! command -v litmus7 >/dev/null; then
  exec "$REPO/tools/sid-root.sh" run bash "$REPO/tools/litmus7.sh" -r "$RUNS" -s "$SIZE" "$@"
fi
for f in "$@"; do
  f=$(cd "$(dirname "$f")" && pwd)/$(basename "$f")
  t=$(basename "$f" .litmus)
  out=$REPO/build/litmus7/$t
  rm -rf "$out"; mkdir -p "$out"
  # -c11 true: the generated C uses <stdatomic.h>; -a 2: two threads.
  litmus7 -c11 true -carch X86_64 -mach x86_64 -a 2 -r "$RUNS" -s "$SIZE" -o "$out" "$f" >/dev/null
  (cd "$out" && make -s >make.log 2>&1 && sh run.sh >run.out 2>&1)
  verdict=$(herd7 -model rc11.cat "$f" 2>/dev/null | awk '/^Observation/ {print $3}')
  case $verdict in Never) rc11=Forbidden ;; Sometimes|Always) rc11=Allowed ;; *) rc11=$verdict ;; esac
  obs=$(awk '/^Observation/ {print $4 "/" $4+$5}' "$out/run.out")
  tm=$(awk '/^Time/ {print $3}' "$out/run.out")
  echo "$t rc11=$rc11 observed=$obs time_s=$tm cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
done
