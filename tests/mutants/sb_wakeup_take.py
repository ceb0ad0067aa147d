# SPDX-License-Identifier: Apache-2.0
"""Store buffering, wakeup.take: the reference's order weakened to acquire."""

FILE = "include/deferred_cleanup/policy.hpp"
FIND = "/// [litmus:wakeup.take]\n  static constexpr std::memory_order take = std::memory_order_seq_cst;"
REPLACE = "/// [litmus:wakeup.take]\n  static constexpr std::memory_order take = std::memory_order_acquire;"
PROPERTY = "the drain's take (exchange on head_) is acquire instead of seq_cst (the lost wakeup is allowed, herd7: tests/litmus/wakeup_sb_*.litmus)"
KILLED_BY = ["litmus"]
KILLING_TESTS = ["test_litmus_files_match_the_policies"]
NOTE = "A locked exchange on x86: no x86 run can show it; tag check only."
