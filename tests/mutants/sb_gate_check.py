# SPDX-License-Identifier: Apache-2.0
"""Store buffering, gate.check: the reference's order weakened to acquire."""

FILE = "include/deferred_cleanup/policy.hpp"
FIND = "/// [litmus:gate.check]\n  static constexpr std::memory_order gate_check = std::memory_order_seq_cst;"
REPLACE = "/// [litmus:gate.check]\n  static constexpr std::memory_order gate_check = std::memory_order_acquire;"
PROPERTY = "a producer's gate check (load of accepting_) is acquire instead of seq_cst (a producer may call the host after shutdown read the gate empty, herd7: tests/litmus/gate_sb_*.litmus)"
KILLED_BY = ["litmus"]
KILLING_TESTS = ["test_litmus_files_match_the_policies"]
NOTE = "A plain load on x86, but it follows the locked fetch_add of gate.enter, which drains the store buffer: no x86 run can show it; tag check only."
