# SPDX-License-Identifier: Apache-2.0
"""Store buffering, wakeup.clear: the reference's order weakened to release."""

FILE = "include/deferred_cleanup/policy.hpp"
FIND = "/// [litmus:wakeup.clear]\n  static constexpr std::memory_order clear = std::memory_order_seq_cst;"
REPLACE = "/// [litmus:wakeup.clear]\n  static constexpr std::memory_order clear = std::memory_order_release;"
PROPERTY = "the drain's clear of scheduled_ is release instead of seq_cst (the lost wakeup is allowed, herd7: tests/litmus/wakeup_sb_*.litmus)"
KILLED_BY = ["litmus"]
KILLING_TESTS = ["test_litmus_files_match_the_policies"]
NOTE = "A plain store on x86, but the next access (take_all's exchange) is a locked read-modify-write that drains the store buffer: no x86 run can show it; tag check only."
