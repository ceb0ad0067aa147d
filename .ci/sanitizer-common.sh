# SPDX-License-Identifier: Apache-2.0
# Shared by .ci/tsan.sh and .ci/asan.sh (sourced, not run).
say() { printf '[sanitize] %s\n' "$*"; }

# Debian's googletest packages provide GTest's CMake config; install them with
# apt when missing (the only download, through the system's package manager).
ensure_tools() {
  local missing=()
  [ -f /usr/lib/x86_64-linux-gnu/cmake/GTest/GTestConfig.cmake ] || [ -f /usr/lib/cmake/GTest/GTestConfig.cmake ] \
    || missing+=(libgtest-dev)
  command -v cmake >/dev/null || missing+=(cmake)
  command -v g++ >/dev/null || missing+=(g++)
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]} (apt)"
    # A new machine may have empty package lists: update once, then retry.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" \
      || { DEBIAN_FRONTEND=noninteractive apt-get update -q || say "apt-get update reported errors; trying anyway"
           DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"; }
  fi
}

# sanitizer_build DIR FLAGS: configure and build tests/cpp with FLAGS.
sanitizer_build() {
  ensure_tools
  local dir=$1 flags=$2
  mkdir -p "$(dirname "$dir")"
  say "cmake -S tests/cpp -B $dir (CXXFLAGS: $flags)"
  # ccache, when installed, in the cache tools/matrix.py and tools/mutate.py
  # share ($DC_CACHE/ccache): a later run, or a fresh clone of the same
  # sources, gets its objects back; the key is the preprocessed source and
  # the flags, so a changed unit is always compiled again.
  local launcher=()
  if command -v ccache >/dev/null; then
    export CCACHE_DIR="${DC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deferred-cleanup}/ccache"
    export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S tests/cpp -B "$dir" -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="$flags" "${launcher[@]}" >"$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log"; exit 1; }
  cmake --build "$dir" -j"$(nproc)"
}

# run_suite BINARY: run the GoogleTest binary under a wall-clock bound.
run_suite() {
  local start=$SECONDS
  timeout "${DC_SANITIZE_TIMEOUT:-1800}" "$1" --gtest_color=no
  say "$(basename "$1"): passed in $((SECONDS - start)) s"
}

# expect_report BINARY PATTERN: the canary must fail and print PATTERN.
expect_report() {
  local out rc=0
  out=$(timeout 120 "$1" 2>&1) || rc=$?
  if [ "$rc" -eq 0 ] || ! grep -q "$2" <<<"$out"; then
    printf '%s\n' "$out" | tail -20
    say "FAIL: $(basename "$1") exited $rc without '$2': the sanitizer build cannot catch its bug"
    exit 1
  fi
  say "$(basename "$1"): reported as expected (exit $rc)"
}
