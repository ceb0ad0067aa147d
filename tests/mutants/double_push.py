# SPDX-License-Identifier: Apache-2.0
"""A destructor pushes its item twice."""

FILE = "include/deferred_cleanup/callback.hpp"
FIND = "  q.push(item);  // step 1: publish the item (wakeup.push)\n"
REPLACE = "  q.push(item);  // step 1: publish the item (wakeup.push)\n  q.push(item);  // MUTANT: pushed twice\n"
PROPERTY = "each item is pushed exactly once; a retry only schedules (a second push links the item to itself)"
KILLED_BY = ["cpp-asan"]
KILLING_TESTS = []  # re-point to the test written for it (tests/cpp was rewritten on the policy core)
NOTE = "The self-linked item makes the drain run a cleanup again and again: a counting cleanup loops until the 30 s per-test timeout (the first kill on the policy core); a freeing cleanup is a use after free under ASan."
