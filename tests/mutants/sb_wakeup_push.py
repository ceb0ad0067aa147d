# SPDX-License-Identifier: Apache-2.0
"""Store buffering, wakeup.push: the reference's order weakened to release."""

FILE = "include/deferred_cleanup/policy.hpp"
FIND = "/// [litmus:wakeup.push]\n  static constexpr std::memory_order push = std::memory_order_seq_cst;"
REPLACE = "/// [litmus:wakeup.push]\n  static constexpr std::memory_order push = std::memory_order_release;"
PROPERTY = "a producer's push (CAS on head_) is release instead of seq_cst (the lost wakeup is allowed, herd7: tests/litmus/wakeup_sb_*.litmus)"
KILLED_BY = ["litmus"]
KILLING_TESTS = ["test_litmus_files_match_the_policies"]
NOTE = "The CAS is a locked read-modify-write on x86: it drains the store buffer, so no x86 run can show the reordering; only the tag check (and herd7 on the litmus file) can."
