#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_bundle.sh: build here everything the GPU machine's one session needs,
# into one folder that the device call carries (tools/gpu_session.sh runs it).
#
#   tools/gpu_bundle.sh [DEST]        DEST defaults to .gpu in this checkout
#
# The GPU machine has no Google Benchmark, no network and Python 3.12; so:
#   bin/bench_core, bin/bench_core_shared_line   tests/bench, CMake Release, with
#       Debian's libbenchmark shared library copied beside them (bin/)
#   bin/libdcpc.so                              tools/pending_call_counter.c
#   bin/_dc_pending_cost.*.so                   tests/bench/pending_cost.c for
#       CPython 3.12 (tools/bench_pending.py --build, with $PYTHON's headers)
#   bin/altpool/altpool.*.so                    tools/alternatives/altpool.cpp for
#       CPython 3.12 (tools/alternatives.py build_ext, with $PYTHON's pybind11):
#       the mutex queue of tests/bench/curves.py
#   wheels/deferred_cleanup-*.whl               this tree, for CPython 3.12
#       (built with the cp312-pyenv environment of tools/matrix.py, or $PYTHON)
#   wheels-cc122/cuda_core-1.2.2-*.whl          pip download (cuda-core 1.2.0
#       is already installed there)
#   tools/                                      bench.py, bench_pending.py,
#       gpu_compare.py, gpu_session.sh, provenance.py of this tree, and
#       tests/bench/curves.py
#   provenance-bench.json, provenance-gpu-compare.json, provenance-pending.json,
#   provenance-curves.json
#       tools/provenance.py stamps of the sources those binaries were built from
#   meta.env                                    commit, compiler, Google
#       Benchmark version
#
# DEST must be ignored by git in the checkout the device call sends (for
# /work/main: a line /.gpu/ in .git/info/exclude).  The device command is
#   bash .gpu/tools/gpu_session.sh        (carry: [".gpu"])
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
DEST=$(realpath -m "${1:-$REPO/.gpu}")
PY=${PYTHON:-$HOME/.cache/deferred-cleanup/venvs/cp312-pyenv/bin/python}
CACHE=${DC_WHEEL_CACHE:-$HOME/.cache/deferred-cleanup/gpu-wheels}
say() { echo "[gpu-bundle] $*"; }

cd "$REPO"
rm -rf "$DEST"
mkdir -p "$DEST"/{bin,wheels,wheels-cc122,tools} build/gpu-bundle "$CACHE"

say "Google Benchmark binaries (tests/bench, Release)"
cmake -S tests/bench -B build/gpu-bundle/bench -DCMAKE_BUILD_TYPE=Release \
  >build/gpu-bundle/cmake.log
cmake --build build/gpu-bundle/bench -j2 >>build/gpu-bundle/cmake.log
cp build/gpu-bundle/bench/bench_core build/gpu-bundle/bench/bench_core_shared_line "$DEST/bin/"
lib=$(ldd build/gpu-bundle/bench/bench_core | awk '/libbenchmark/ {print $3}')
cp -L "$lib" "$DEST/bin/$(basename "$lib")"

say "pending-call counter (tools/pending_call_counter.c)"
gcc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$DEST/bin/libdcpc.so" \
  tools/pending_call_counter.c -ldl

say "Py_AddPendingCall cost module (tests/bench/pending_cost.c) for CPython 3.12 ($PY)"
"$PY" tools/bench_pending.py --build "$DEST/bin" >/dev/null

say "altpool (tools/alternatives/altpool.cpp) for CPython 3.12 ($PY): the curves' mutex queue"
"$PY" -c 'import sys; from pathlib import Path; sys.path.insert(0, "tools"); import alternatives
alternatives.build_ext(Path(sys.argv[1]))' "$DEST/bin/altpool"

say "deferred_cleanup wheel for CPython 3.12 ($PY)"
"$PY" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
  -C build-dir=build/gpu-bundle/wheel -w "$DEST/wheels" . >build/gpu-bundle/wheel.log 2>&1 \
  || { tail -20 build/gpu-bundle/wheel.log; exit 1; }

say "cuda-core 1.2.2 wheel (pip download, cached in $CACHE)"
if ! ls "$CACHE"/cuda_core-1.2.2-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$CACHE" cuda-core==1.2.2
fi
cp "$CACHE"/cuda_core-1.2.2-*.whl "$DEST/wheels-cc122/"

say "scripts and provenance stamps"
cp tools/bench.py tools/bench_pending.py tools/gpu_compare.py tools/gpu_session.sh \
  tools/provenance.py tests/bench/curves.py tests/bench/e2e.py "$DEST/tools/"
python3 tools/provenance.py show --glob 'tests/bench/pending_cost.c' --glob 'tools/bench_pending.py' \
  >"$DEST/provenance-pending.json"
python3 tools/provenance.py show --glob 'include/deferred_cleanup/*.hpp' --glob 'include/deferred_cleanup/comparison/*.hpp' \
  --glob 'tests/bench/*.cpp' --glob 'tests/bench/*.hpp' --glob 'tests/bench/CMakeLists.txt' \
  >"$DEST/provenance-bench.json"
# The package's globs (tools/provenance.py PACKAGE_GLOBS), as --glob arguments.
mapfile -t pkg < <(python3 tools/provenance.py package-globs)
pkg_args=()
for g in "${pkg[@]}"; do pkg_args+=(--glob "$g"); done
# the comparison headers follow the core headers (the first package glob), as the
# committed stamp has them
python3 tools/provenance.py show "${pkg_args[@]:0:2}" --glob 'include/deferred_cleanup/comparison/*.hpp' \
  "${pkg_args[@]:2}" --glob 'tools/gpu_compare.py' \
  --glob 'tools/pending_call_counter.c' >"$DEST/provenance-gpu-compare.json"
# the globs of tests/bench/curves.py (GLOBS)
python3 tools/provenance.py show "${pkg_args[@]}" --glob 'tests/bench/curves.py' --glob 'tests/bench/e2e.py' \
  --glob 'tools/alternatives/altpool.cpp' >"$DEST/provenance-curves.json"
{
  dirty=$(git status --porcelain --untracked-files=no | grep -q . && echo +uncommitted || true)
  echo "DC_COMMIT=$(git rev-parse --short=12 HEAD)$dirty"
  echo "DC_BENCH_COMPILER='$(g++ --version | head -1)'"
  echo "DC_BENCH_GBENCH='$(dpkg-query -W -f='${Version}' libbenchmark-dev)'"
} >"$DEST/meta.env"
say "$(du -sh "$DEST" | cut -f1) in $DEST"
say "device command: bash .gpu/tools/gpu_session.sh (carry .gpu)"
