# SPDX-License-Identifier: Apache-2.0
"""Store buffering, gate.wait: the reference's order weakened to acquire."""

FILE = "include/deferred_cleanup/policy.hpp"
FIND = "/// [litmus:gate.wait]\n  static constexpr std::memory_order gate_wait = std::memory_order_seq_cst;"
REPLACE = "/// [litmus:gate.wait]\n  static constexpr std::memory_order gate_wait = std::memory_order_acquire;"
PROPERTY = "shutdown's gate read (load of in_flight_) is acquire instead of seq_cst (a producer may call the host after shutdown read the gate empty, herd7: tests/litmus/gate_sb_*.litmus)"
KILLED_BY = ["litmus"]
KILLING_TESTS = ["test_litmus_files_match_the_policies"]
NOTE = "A plain load on x86 after gate.close; while close stays seq_cst (xchg or mov+mfence) the store buffer is drained first, so no x86 run can show it; tag check only."
