# SPDX-License-Identifier: Apache-2.0
"""Store buffering, gate.enter: the reference's order weakened to acq_rel."""

FILE = "include/deferred_cleanup/policy.hpp"
FIND = "/// [litmus:gate.enter]\n  static constexpr std::memory_order gate_enter = std::memory_order_seq_cst;"
REPLACE = "/// [litmus:gate.enter]\n  static constexpr std::memory_order gate_enter = std::memory_order_acq_rel;"
PROPERTY = "a producer's gate entry (fetch_add on in_flight_) is acq_rel instead of seq_cst (a producer may call the host after shutdown read the gate empty, herd7: tests/litmus/gate_sb_*.litmus)"
KILLED_BY = ["litmus"]
KILLING_TESTS = ["test_litmus_files_match_the_policies"]
NOTE = "A locked fetch_add on x86: no x86 run can show it; tag check only."
