# SPDX-License-Identifier: Apache-2.0
"""A stale claim is never re-armed."""

FILE = "include/deferred_cleanup/rearm.hpp"
FIND = """\
  static_assert(P::rearm, "only the reference re-arms");
  RearmState<P>& r = q.rearm;
  const Host& host = q.host();
  if (host.now_ns == nullptr) {
"""
REPLACE = """\
  static_assert(P::rearm, "only the reference re-arms");
  RearmState<P>& r = q.rearm;
  const Host& host = q.host();
  if (true) {  // MUTANT: never re-arm
"""
PROPERTY = "one lost pending call does not disable the pending-call path: a later enqueue or entry point re-arms a stale claim"
KILLED_BY = ["cpp", "pytest:cp312-pyenv:tests/test_rearm.py"]
KILLING_TESTS = ["Rearm.LostCallRecoveredByALaterEnqueueAfterTheStaleBound"]
