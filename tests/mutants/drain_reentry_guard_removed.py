# SPDX-License-Identifier: Apache-2.0
"""drain_all() loses its re-entrancy guard: a drain inside a cleanup drains too."""

FILE = "include/deferred_cleanup/drain.hpp"
FIND = """\
  if (q.draining() || !q.host_alive()) {
    return 0;
"""
REPLACE = """\
  if (!q.host_alive()) {  // MUTANT: no re-entrancy guard
    return 0;
"""
PROPERTY = "drain_all() called again from inside a drain returns 0 at once; the outer drain takes the new items, each once, in push order"
KILLED_BY = ["cpp"]
KILLING_TESTS = ["DrainAllInsideADrainReturnsAtOnce"]
NOTE = "from Python CPython runs no pending call inside another, and the entry points and drain_now() check the flag themselves; a pending call inside a cleanup of a direct drain reaches this guard"
