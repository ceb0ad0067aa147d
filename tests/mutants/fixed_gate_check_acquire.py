# SPDX-License-Identifier: Apache-2.0
"""cuda-core-1.2-fixed's gate check left at the shipped acquire order."""

FILE = "include/deferred_cleanup/comparison/policies.hpp"
FIND = "  /// The gate fix: seq_cst (shipped: acquire), in S after gate_enter.\n  static constexpr std::memory_order gate_check = std::memory_order_seq_cst;"
REPLACE = "  /// The gate fix: seq_cst (shipped: acquire), in S after gate_enter.\n  static constexpr std::memory_order gate_check = std::memory_order_acquire;  // MUTANT"
PROPERTY = "cuda-core-1.2-fixed's gate has the reference's orders, seq_cst on all four (an acquire check lets a producer call the host after the exit hook read the gate empty: herd7, tests/litmus/gate_sb_*.litmus)"
KILLED_BY = ["litmus"]
KILLING_TESTS = ["test_litmus_files_match_the_policies"]
NOTE = "as sb_gate_check for the reference: the locked increment before it drains the store buffer on x86, so only the tag check against gate_sb_reference.litmus can see it"
