#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The C++ core under ThreadSanitizer (make tsan; make sanitize runs this and
# .ci/asan.sh).  Builds tests/cpp in build/tsan with -fsanitize=thread, runs
# the GoogleTest suite (8 producers x DC_STRESS_ITEMS items, default 10^6),
# then proves the setup can fail: a deliberately racy canary must be reported.
#
# Knobs: DC_STRESS_ITEMS (items per producer), DC_STRESS_PRODUCERS, and the
# others listed in tests/cpp/stress_tests.cpp.
# Suppressions: none (TSAN_OPTIONS below names no suppressions file).
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/sanitizer-common.sh

BUILD=build/tsan
FLAGS="-fsanitize=thread -g -O1 -fno-omit-frame-pointer"
sanitizer_build "$BUILD" "$FLAGS"

# halt_on_error: the first report fails the run; second_deadlock_stack for
# readable lock reports.  No suppressions.
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 history_size=4"
say "ThreadSanitizer: core_tests (DC_STRESS_ITEMS=${DC_STRESS_ITEMS:-1000000} x ${DC_STRESS_PRODUCERS:-8} producers)"
run_suite "$BUILD/core_tests"

say "ThreadSanitizer: the racy canary must be reported"
expect_report "$BUILD/sanitizer_canary_race" "WARNING: ThreadSanitizer: data race"
say "tsan: ok"
