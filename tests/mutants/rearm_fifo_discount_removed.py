# SPDX-License-Identifier: Apache-2.0
"""The claim's call no longer frees the right to supersede when it runs (lost calls count for ever)."""

FILE = "include/deferred_cleanup/rearm_state.hpp"
FIND = """\
    if (s != 0 && seq >= s) {
      // FIFO: the superseded call is gone; clear only that number.
      superseded_seq_.compare_exchange_strong(s, 0, std::memory_order_relaxed);
    }
"""
REPLACE = """\
    if (s != 0 && seq == s) {  // MUTANT: only the superseded call itself frees the right
      superseded_seq_.compare_exchange_strong(s, 0, std::memory_order_relaxed);
    }
"""
PROPERTY = "when a newer call runs, a superseded call that never ran was lost (FIFO ring): a second lost call is re-armed too"
KILLED_BY = ["cpp"]
KILLING_TESTS = ["Rearm.SecondLostCallIsRecoveredByALaterEnqueue"]
