# SPDX-License-Identifier: Apache-2.0
"""The reference's push (CAS on head_) is relaxed: the item's fields are not published."""

FILE = "include/deferred_cleanup/policy.hpp"
FIND = "/// [litmus:wakeup.push]\n  static constexpr std::memory_order push = std::memory_order_seq_cst;"
REPLACE = "/// [litmus:wakeup.push]\n  static constexpr std::memory_order push = std::memory_order_relaxed;  // MUTANT"
PROPERTY = (
    "the item's fields happen-before the take that receives it (the push is at least a release)"
)
KILLED_BY = ["litmus"]
KILLING_TESTS = ["test_litmus_files_match_the_policies"]
NOTE = "x86 cannot show it: a locked CAS is a full barrier; the tag check binds wakeup.push to its litmus event (seq_cst)"
