# SPDX-License-Identifier: Apache-2.0
"""A call superseded by a re-arm clears scheduled_ as if it were the claim's call."""

FILE = "include/deferred_cleanup/drain.hpp"
FIND = """\
    if (current) {
      if constexpr (P::rearm) {
        q.rearm.stop_stale_clock();  // re-arming: the claim's call has run
      }
      q.clear();  // before the take: consumer half of the store-buffering pair
    }
"""
REPLACE = """\
    (void)current;  // MUTANT: every call clears, superseded or not
    {
      if constexpr (P::rearm) {
        q.rearm.stop_stale_clock();  // re-arming: the claim's call has run
      }
      q.clear();  // before the take: consumer half of the store-buffering pair
    }
"""
PROPERTY = "only the claim's call clears scheduled_; a superseded call only drains (else a superseded call clears a newer claim and a second claimant adds a call)"
KILLED_BY = ["cpp"]
KILLING_TESTS = ["Rearm.SupersededCallDrainsButDoesNotClearTheClaim"]
