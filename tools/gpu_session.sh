#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_session.sh: the whole GPU-machine session in one command, on the folder
# tools/gpu_bundle.sh built (carried as .gpu).  Everything comes back under
# $OUT, in at most 8 files:
#   session.log        this script's output
#   machine.txt        nvidia-smi, CPU, Python, the installed cuda-core
#   bench.json         tools/bench.py's report of the C++ benchmarks (both
#                      binaries), stamped with the bundle's provenance
#   gpu-compare.json   tools/gpu_compare.py's run, stamped likewise
#   gpu-compare.md     its table
#   pending.json       tools/bench_pending.py --one: ns per Py_AddPendingCall
#                      from a foreign thread, uncontended and 8 racing, on the
#                      host's python3 (3.12), stamped with the bundle's stamp
#   curves.json        tests/bench/curves.py all: latency, pending calls, CPU
#                      and memory per burst of 1..10^6, each variant of our
#                      wheel and the mutex queue (altpool), stamped likewise
#                      (about 15 s; hang guard CURVES_TIMEOUT_S, 150;
#                      CURVES_SMOKE=1: the smoke sizes)
#   logs.tar.gz        every raw log (benchmark JSON, per-subprocess logs)
#
# Knobs (environment): DC_BENCH_REPS (3), DC_BENCH_HEADLINE_REPS (5: the
# single-producer destructor rows, their floors and the clock pair, which
# include the slow-path breakdown's rows), DC_BENCH_MIN_TIME (0.2 s),
# BENCH_TIMEOUT_S (420: the breakdown adds 16 rows),
# GC_BUDGET_S (220: gpu_compare's wall-clock budget), GC_E_SECONDS (10),
# GC_SCENARIOS (X,E,A,B,C,D: X and E first, so that the budget never cuts
# them: they are the exit and lost-wakeup scenarios that show
# cuda-core-1.2-fixed, the third of our variants, against the shipped shape).
# Run: bash .gpu/tools/gpu_session.sh   (from the root of the carried checkout)
set -u
B=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/gpu-session-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/session.log") 2>&1
say() { echo "[gpu-session $(date -u +%H:%M:%S)] $*"; }
set -a
# shellcheck disable=SC1091
. "$B/meta.env"
set +a
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

say "machine"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nproc; lscpu | grep -E 'Model name|Socket|Core|Thread|NUMA node\(s\)|L2|L3'
  python3 --version
  python3 -m pip show cuda-core cuda-bindings 2>/dev/null | grep -E '^(Name|Version|Location)'
  uname -r; uptime
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

say "install: our wheel into /tmp/dc, cuda-core 1.2.2 into /tmp/cc122"
pipi() { python3 -m pip install -q --no-index --no-deps --no-compile --target "$@"; }
pipi /tmp/dc "$B"/wheels/*.whl || exit 3
pipi /tmp/cc122 "$B"/wheels-cc122/*.whl || exit 3

say "benchmarks (DC_BENCH_REPS=${DC_BENCH_REPS:-3}, DC_BENCH_HEADLINE_REPS=${DC_BENCH_HEADLINE_REPS:-5})"
export LD_LIBRARY_PATH="$B/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
DC_BENCH_BINARY_DIR="$B/bin" DC_BENCH_NO_E2E=1 DC_BENCH_REPS=${DC_BENCH_REPS:-3} \
  DC_BENCH_HEADLINE_REPS=${DC_BENCH_HEADLINE_REPS:-5} \
  DC_BENCH_MIN_TIME=${DC_BENCH_MIN_TIME:-0.2} DC_BENCH_PROVENANCE="$B/provenance-bench.json" \
  DC_BENCH_MACHINE_NOTE="the GPU host's 16-core virtual machine; nothing else of this project \
ran during the run" \
  timeout "${BENCH_TIMEOUT_S:-420}" python3 "$B/tools/bench.py" && cp "$B/build/bench/bench.json" "$OUT/bench.json"
say "benchmarks: exit $?"

say "Py_AddPendingCall's own cost (tools/bench_pending.py)"
timeout 120 python3 "$B/tools/bench_pending.py" --one --so "$(ls "$B"/bin/_dc_pending_cost*.so | head -1)" \
  --stamp "$B/provenance-pending.json" --json "$OUT/pending.json"
say "bench_pending: exit $?"

say "cost as the work grows (tests/bench/curves.py)"
PYTHONPATH=/tmp/dc timeout "${CURVES_TIMEOUT_S:-150}" python3 "$B/tools/curves.py" all \
  ${CURVES_SMOKE:+--smoke} \
  --out "$OUT/curves.json" --altpool "$B/bin/altpool" --stamp "$B/provenance-curves.json" \
  --note "the GPU host's 16-core virtual machine; nothing else of this project ran during the run"
say "curves: exit $?"

say "gpu_compare (budget ${GC_BUDGET_S:-220} s)"
PYTHONPATH=/tmp/dc DCPC_LIB="$B/bin/libdcpc.so" timeout 270 python3 "$B/tools/gpu_compare.py" \
  --out /tmp/gc --cuda-core 1.2.0=env --cuda-core 1.2.2=/tmp/cc122 --ours reference cuda-core-1.2 cuda-core-1.2-fixed \
  --scenarios "${GC_SCENARIOS:-X,E,A,B,C,D}" --budget-s "${GC_BUDGET_S:-220}" \
  --e-seconds "${GC_E_SECONDS:-10}"
say "gpu_compare: exit $?"
if [ -f /tmp/gc/gpu-compare.json ]; then
  python3 - "$B/provenance-gpu-compare.json" /tmp/gc/gpu-compare.json <<'EOF'
import json, sys
stamp, path = json.load(open(sys.argv[1])), sys.argv[2]
data = json.load(open(path))
data["provenance"] = stamp
open(path, "w").write(json.dumps(data, indent=1) + "\n")
EOF
  python3 "$B/tools/gpu_compare.py" --render /tmp/gc/gpu-compare.json
  cp /tmp/gc/gpu-compare.json /tmp/gc/gpu-compare.md "$OUT/"
  tail -30 /tmp/gc/gpu-compare.md
fi
tar -czf "$OUT/logs.tar.gz" -C /tmp gc/logs -C "$B" build/bench 2>/dev/null
say "done: $(ls "$OUT" | tr '\n' ' ')"
