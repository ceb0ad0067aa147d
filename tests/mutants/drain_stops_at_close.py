# SPDX-License-Identifier: Apache-2.0
"""The drain refuses to run once the gate is closed, not only once the host is dead."""

FILE = "include/deferred_cleanup/drain.hpp"
FIND = """\
  if (q.draining() || !q.host_alive()) {
    return 0;
"""
REPLACE = """\
  if (q.draining() || !q.host_alive() || !q.accepting()) {  // MUTANT: no drain after close
    return 0;
"""
PROPERTY = "after the exit hook closed the gate the main thread still drains, until CPython sets its finalizing flag"
KILLED_BY = ["cpp"]
KILLING_TESTS = ["Shutdown.AfterCloseOnlyTheMainThreadDrainsUntilHostDead"]
