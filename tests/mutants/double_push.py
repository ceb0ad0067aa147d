"""A destructor pushes its item a second time when the host refuses."""
FILE = "reference/include/deferred_cleanup/callback.hpp"
FIND = '  q.push(item);  // step 1: publish the item (wakeup.push)\n'
REPLACE = '  q.push(item);  // step 1: publish the item (wakeup.push)\n  q.push(item);  // MUTANT: pushed twice\n'
PROPERTY = "each item is pushed exactly once; a retry only schedules (a second push links the item to itself)"
KILLED_BY = ["cpp-asan"]
KILLING_TESTS = []  # re-point to the test written for it (tests/cpp was rewritten on the policy core)
NOTE = "The self-linked item makes the drain run a freed item's cleanup again: AddressSanitizer reports it; without ASan a counting cleanup would loop forever."
