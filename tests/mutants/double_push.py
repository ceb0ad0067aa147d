# SPDX-License-Identifier: Apache-2.0
"""A destructor pushes its item twice."""

FILE = "include/deferred_cleanup/callback.hpp"
FIND = "  q.push(item);  // step 1: publish the item (wakeup.push)\n"
REPLACE = "  q.push(item);  // step 1: publish the item (wakeup.push)\n  q.push(item);  // MUTANT: pushed twice\n"
PROPERTY = "each item is pushed exactly once; a retry only schedules (a second push links the item to itself)"
KILLED_BY = ["cpp"]
KILLING_TESTS = ["ACallbackLinksItsItemIntoTheQueueOnce"]
NOTE = "The self-linked item makes a drain run its cleanup again and again (a counting cleanup loops until the per-test timeout; a freeing one is a use after free under ASan): the killing test reads the links before any drain, so it fails at once, with no sanitizer."
