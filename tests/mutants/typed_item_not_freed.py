# SPDX-License-Identifier: Apache-2.0
"""A typed item's cleanup forgets to delete it: its value is never destroyed."""

FILE = "include/deferred_cleanup/item.hpp"
FIND = "  static void destroy(void* self) noexcept { delete static_cast<Item*>(self); }\n"
REPLACE = "  static void destroy(void* self) noexcept { (void)self; }  // MUTANT: leaked\n"
PROPERTY = "a typed item handed off is deleted by its cleanup: its value's destructor runs once, on the main thread"
KILLED_BY = ["cpp"]
KILLING_TESTS = ["Api.TypedItemsHandedOffFromAThreadAreDestroyedOnceOnTheMainThread"]
