#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_upstream.sh: the GPU session of the upstream findings (cuda-core
# holes, notes/upstream/), in one command from the root of a checkout:
#
#   bash tools/gpu_upstream.sh          # $OUT: where the results go
#
# Needs: python3 with cuda-core installed (the GPU machine: Ubuntu 24.04,
# CPython 3.12.3, cuda-core 1.2.0 system-wide), g++ (C++20), objdump, nm.
# No network, no Google Test or Google Benchmark, nothing of this project
# installed.  Without a GPU the GPU parts of the reproducer skip with their
# reason and the rest still runs.  At most 270 s for the reproducer and 180 s
# for lost_wakeup (timeouts), about 4 minutes in all on the H200 host.
#
# Writes at most 6 files into $OUT:
#   session.log        this script's output
#   machine.txt        GPU, CPU, Python, cuda-core, compiler; sha256 of every
#                      source this session ran (tools/gpu_upstream_collect.sh
#                      checks them before it stamps the results)
#   repro.json         notes/upstream/repro/cuda_core_holes.py --json: the
#                      three holes on the installed wheel (scenarios E and X,
#                      the exit-timing sweep, the objdump of the installed
#                      .so) and the C++ shape of the drain tail (sb_shape.cpp)
#   lost-wakeup.json   tests/cpp/lost_wakeup.cpp, every variant including
#                      cuda-core-1.2-fixed, 2x10^6 handoffs each
#   lost-wakeup-disasm.txt  the drain tails of cuda-core-1.2 and
#                      cuda-core-1.2-fixed as compiled here (objdump)
# Knobs (environment): UP_SB_ITER (2000000), UP_X_RUNS (10), UP_FIN_RUNS (30),
# UP_E_SECONDS (8), UP_LW_ITER (2000000).
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/gpu-upstream-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/session.log") 2>&1
say() { echo "[gpu-upstream $(date -u +%H:%M:%S)] $*"; }
cd "$REPO"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
INC=include
SOURCES="notes/upstream/repro/cuda_core_holes.py notes/upstream/repro/sb_shape.cpp \
tests/cpp/lost_wakeup.cpp tests/cpp/race_harness.hpp $INC/deferred_cleanup/*.hpp \
$INC/deferred_cleanup/comparison/*.hpp"

say "machine"
{
  echo "date_utc: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
  echo "nproc: $(nproc)"
  lscpu 2>/dev/null | grep -E 'Model name|Socket|Core|Thread' || true
  python3 --version
  python3 -m pip show cuda-core cuda-bindings 2>/dev/null | grep -E '^(Name|Version|Location)' || true
  g++ --version | head -1
  objdump --version | head -1
  uname -r
  echo "sources:"
  # shellcheck disable=SC2086
  sha256sum $SOURCES
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

say "reproducer (notes/upstream/repro/cuda_core_holes.py)"
timeout 270 python3 notes/upstream/repro/cuda_core_holes.py --json "$OUT/repro.json" \
  --sb-iterations "${UP_SB_ITER:-2000000}" --x-runs "${UP_X_RUNS:-10}" \
  --fin-runs "${UP_FIN_RUNS:-30}" --e-seconds "${UP_E_SECONDS:-8}" --budget-s 240
say "reproducer: exit $?"

say "lost_wakeup, every variant (tests/cpp/lost_wakeup.cpp, g++ -O2)"
B=$(mktemp -d)
if g++ -O2 -std=c++20 -Wall -Wextra -pthread -I "$INC" -I tests/cpp tests/cpp/lost_wakeup.cpp \
  -o "$B/lost_wakeup"; then
  timeout 180 "$B/lost_wakeup" --variant all --iterations "${UP_LW_ITER:-2000000}" \
    --json "$OUT/lost-wakeup.json"
  say "lost_wakeup: exit $?"
  {
    for v in CudaCore12Policy CudaCore12FixedPolicy; do
      # any namespace of the policy (deferred_cleanup:: or a nested one)
      sym=$(nm -C "$B/lost_wakeup" | awk -v v="$v" '$0 ~ "pending_call<[a-z_:]*::" v ">" {print $1; exit}')
      echo "## drain: pending_call<...::$v>(void*) at 0x$sym"
      [ -n "$sym" ] && objdump -d --no-show-raw-insn "$B/lost_wakeup" --start-address=$((16#$sym)) \
        --stop-address=$((16#$sym + 512)) | grep -E '^ +[0-9a-f]+:' | sed -n '1,/ret/p'
    done
  } >"$OUT/lost-wakeup-disasm.txt" 2>&1
else
  say "lost_wakeup: build failed"
fi
rm -rf "$B"
say "done: $(ls "$OUT" | tr '\n' ' ')"
