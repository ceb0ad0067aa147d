# SPDX-License-Identifier: Apache-2.0
"""The drain reads an item's `next` after running its cleanup."""

FILE = "include/deferred_cleanup/drain.hpp"
FIND = """\
    DeferredCleanupItem* next = list->next;  // read before cleanup may free the item
    run_cleanup(list);
"""
REPLACE = """\
    run_cleanup(list);
    DeferredCleanupItem* next = list->next;  // MUTANT: read after the cleanup
"""
PROPERTY = "the drain never touches an item after its cleanup ran (the cleanup may free it)"
KILLED_BY = ["cpp-asan"]
KILLING_TESTS = ["PendingCallNeverReadsAFreedItem", "heap-use-after-free"]
NOTE = "Needs a cleanup that frees and poisons its item, under AddressSanitizer; a cleanup that only counts cannot see it."
