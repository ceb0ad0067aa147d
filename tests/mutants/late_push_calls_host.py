# SPDX-License-Identifier: Apache-2.0
"""A producer passes the gate after close(), so a late callback calls CPython."""

FILE = "include/deferred_cleanup/queue.hpp"
FIND = """\
    if (accepting()) {
      return true;
    }
    gate_leave();
"""
REPLACE = """\
    if (accepting() || true) {  // MUTANT: the gate ignores close()
      return true;
    }
    gate_leave();
"""
PROPERTY = "a push after close() gets no pending call: it only enqueues (enqueued_late), and is leaked once CPython is finalizing"
KILLED_BY = [
    "cpp",
    "pytest:cp312-pyenv:tests/test_shutdown.py -k 'callbacks_after_finalization and reference'",
]
KILLING_TESTS = ["Shutdown.AfterCloseOnlyTheMainThreadDrainsUntilHostDead"]
NOTE = "in Shutdown.AfterCloseCallbacksOnlyEnqueueAndAreLeaked the late callbacks meet the claim of the call made before shutdown and stop at the fast path; the pytest check (test_callbacks_after_finalization_only_enqueue[reference]) fails too"
