#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The C++ core under AddressSanitizer + UndefinedBehaviorSanitizer (make asan;
# make sanitize runs .ci/tsan.sh and this).  Builds tests/cpp in build/asan
# with -fsanitize=address,undefined -fno-sanitize-recover=all, runs the
# GoogleTest suite (8 producers x DC_STRESS_ITEMS items, default 10^6), then
# proves the setup can fail: a use-after-free canary must be reported.
#
# Suppressions: none.
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/sanitizer-common.sh

BUILD=build/asan
FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -g -O1 -fno-omit-frame-pointer"
sanitizer_build "$BUILD" "$FLAGS"

export ASAN_OPTIONS="detect_leaks=1 abort_on_error=0 halt_on_error=1 detect_stack_use_after_return=1 strict_init_order=1"
export UBSAN_OPTIONS="print_stacktrace=1 halt_on_error=1"
say "AddressSanitizer+UBSan: core_tests (DC_STRESS_ITEMS=${DC_STRESS_ITEMS:-1000000} x ${DC_STRESS_PRODUCERS:-8} producers)"
run_suite "$BUILD/core_tests"

say "AddressSanitizer: the use-after-free canary must be reported"
expect_report "$BUILD/sanitizer_canary_uaf" "ERROR: AddressSanitizer: heap-use-after-free"
say "asan: ok"
