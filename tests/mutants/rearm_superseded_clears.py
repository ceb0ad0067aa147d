"""A call superseded by a re-arm clears scheduled_ as if it were the claim's call."""
FILE = "reference/include/deferred_cleanup/drain.hpp"
FIND = """\
    if (current) {
      if constexpr (P::rearm) {
        q.set_claimed_at(0);
      }
      q.clear();  // before the take: consumer half of the store-buffering pair
    }
"""
REPLACE = """\
    (void)current;  // MUTANT: every call clears, superseded or not
    {
      if constexpr (P::rearm) {
        q.set_claimed_at(0);
      }
      q.clear();  // before the take: consumer half of the store-buffering pair
    }
"""
PROPERTY = "only the claim's call clears scheduled_; a superseded call only drains (at most two calls outstanding)"
KILLED_BY = ["cpp"]
KILLING_TESTS = ["Rearm.SupersededCallDrainsButDoesNotClearTheClaim"]
