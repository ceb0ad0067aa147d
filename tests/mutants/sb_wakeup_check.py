# SPDX-License-Identifier: Apache-2.0
"""Store buffering, wakeup.check: the reference's order weakened to acq_rel."""

FILE = "include/deferred_cleanup/policy.hpp"
FIND = "/// [litmus:wakeup.check]\n  static constexpr std::memory_order check = std::memory_order_seq_cst;"
REPLACE = "/// [litmus:wakeup.check]\n  static constexpr std::memory_order check = std::memory_order_acquire;"
PROPERTY = "a producer's fast-path check of scheduled_ (a load after its push) is acquire instead of seq_cst (the order the policy states and the litmus files model; herd7 forbids the lost wakeup even so, tests/litmus/wakeup_fast_sb_check_acquire.litmus: the seq_cst take synchronizes with the seq_cst push)"
KILLED_BY = ["litmus"]
KILLING_TESTS = ["test_litmus_files_match_the_policies"]
NOTE = "A plain load after the push; the push is a locked CAS on x86, which drains the store buffer: no x86 run can show it; tag check only."
