#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_collect.sh DIR: put what tools/gpu_session.sh brought back from the GPU
# host (DIR: the device call's files_at) where the docs read it:
#   DIR/bench.json                      -> docs/_data/bench.json
#   DIR/pending.json                    -> notes/gpu/pending.json (tools/bench_pending.py)
#   DIR/curves.json                     -> docs/_data/curves.json (tests/bench/curves.py;
#                                          the Performance page shows it in place of
#                                          curves-2core-smoke.json)
#   DIR/gpu-compare.{json,md}, machine.txt, session.log, logs.tar.gz's gc/logs
#                                       -> notes/gpu/compare/ (replaced whole)
# The JSON files already carry the provenance stamp of the bundle they ran.
set -euo pipefail
SRC=$(realpath "$1")
cd "$(dirname "$0")/.."
if [ -f "$SRC/bench.json" ]; then cp "$SRC/bench.json" docs/_data/bench.json
else echo "no bench.json in $SRC"; fi
if [ -f "$SRC/pending.json" ]; then cp "$SRC/pending.json" notes/gpu/pending.json
else echo "no pending.json in $SRC"; fi
if [ -f "$SRC/curves.json" ]; then cp "$SRC/curves.json" docs/_data/curves.json
else echo "no curves.json in $SRC"; fi
if [ -f "$SRC/gpu-compare.json" ]; then
  rm -rf notes/gpu/compare
  mkdir -p notes/gpu/compare
  for f in gpu-compare.json gpu-compare.md machine.txt session.log; do
    cp "$SRC/$f" notes/gpu/compare/
  done
  tmp=$(mktemp -d)
  tar -xzf "$SRC/logs.tar.gz" -C "$tmp"
  cp -r "$tmp/gc/logs" notes/gpu/compare/logs
  rm -rf "$tmp"
else
  echo "no gpu-compare.json in $SRC"
fi
git status --short docs/_data notes/gpu | sed -n 1,10p  # sed reads it all: head would end git with SIGPIPE, an error under pipefail
