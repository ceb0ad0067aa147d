#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_upstream_collect.sh DIR: put what tools/gpu_upstream.sh brought back
# from the GPU host (DIR: the device call's files_at) into
# notes/upstream/results/ (replaced whole), each data file stamped with
# tools/provenance.py:
#   repro.json              globs notes/upstream/repro/*
#   lost-wakeup.json        globs tests/cpp/lost_wakeup.cpp, tests/cpp/race_harness.hpp,
#   lost-wakeup-disasm.txt        the deferred_cleanup headers
#   machine.txt, session.log  copied as they are
# First it checks the sha256 of every source the session ran (machine.txt,
# "sources:") against this tree, so that a stamp never names code the
# session did not run; a mismatch stops it (exit 1) unless UP_FORCE=1.
set -euo pipefail
SRC=$(realpath "$1")
cd "$(dirname "$0")/.."
INC=include
[ -f "$SRC/machine.txt" ] || { echo "no machine.txt in $SRC"; exit 1; }
if ! sed -n '/^sources:$/,$p' "$SRC/machine.txt" | tail -n +2 | sha256sum -c --quiet; then
  echo "the sources differ from those the GPU session ran (above)"
  [ "${UP_FORCE:-0}" = 1 ] || exit 1
fi
DST=notes/upstream/results
rm -rf "$DST"
mkdir -p "$DST"
for f in repro.json lost-wakeup.json lost-wakeup-disasm.txt machine.txt session.log; do
  if [ -f "$SRC/$f" ]; then cp "$SRC/$f" "$DST/"; else echo "missing: $f"; fi
done
chmod u+w "$DST"/*
[ -f "$DST/repro.json" ] &&
  python3 tools/provenance.py stamp "$DST/repro.json" --glob 'notes/upstream/repro/*'
for f in lost-wakeup.json lost-wakeup-disasm.txt; do
  [ -f "$DST/$f" ] && python3 tools/provenance.py stamp "$DST/$f" --glob tests/cpp/lost_wakeup.cpp \
    --glob tests/cpp/race_harness.hpp --glob "$INC/deferred_cleanup/*.hpp" \
    --glob "$INC/deferred_cleanup/comparison/*.hpp"
done
[ -f "$DST/repro.json" ] && python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print("\n".join(d.get("lines", [])))' "$DST/repro.json"
git status --short "$DST"
