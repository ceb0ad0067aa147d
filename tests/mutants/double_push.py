"""A destructor pushes its item a second time when the host refuses."""
FILE = "reference/include/deferred_cleanup/callback.hpp"
FIND = "  if (r == ScheduleResult::not_accepting) {\n"
REPLACE = "  if (r == ScheduleResult::refused) queue.push(item);  // MUTANT: re-push on refusal\n  if (r == ScheduleResult::not_accepting) {\n"
PROPERTY = "each item is pushed exactly once; a retry only schedules (a second push links the item to itself)"
KILLED_BY = ["cpp-asan"]
KILLING_TESTS = ["CleanupMayFreeAndPoisonItsItem", "heap-use-after-free"]
NOTE = "The self-linked item makes the drain run a freed item's cleanup again: AddressSanitizer reports it; without ASan a counting cleanup would loop forever."
