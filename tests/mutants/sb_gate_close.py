# SPDX-License-Identifier: Apache-2.0
"""Store buffering, gate.close: the reference's order weakened to release."""

FILE = "include/deferred_cleanup/policy.hpp"
FIND = "/// [litmus:gate.close]\n  static constexpr std::memory_order gate_close = std::memory_order_seq_cst;"
REPLACE = "/// [litmus:gate.close]\n  static constexpr std::memory_order gate_close = std::memory_order_release;"
PROPERTY = "shutdown's close (store to accepting_) is release instead of seq_cst (a producer may call the host after shutdown read the gate empty, herd7: tests/litmus/gate_sb_*.litmus)"
KILLED_BY = ["litmus", "pytest:cp312-pyenv:-q tests/test_gate_sb.py"]
# Only the litmus check's test: `--fast` (make test) skips the pytest check when a
# mutant names another, and the pytest check must fail as a whole anyway
# (tests/test_gate_sb.py: test_reference_gate_never_lets_a_producer_past_shutdown).
KILLING_TESTS = ["test_litmus_files_match_the_policies"]
NOTE = "The one pair x86 CAN reorder: a plain store (release) followed by a plain load (gate.wait), so shutdown may read in_flight_ == 0 while its close still sits in the store buffer and a producer enters and reads accepting_ == true. The orders are compile-time constants, so the release build emits exactly that shape, and the hardware stress test tests/test_gate_sb.py (tests/cpp/gate_sb.cpp: the real gate_enter() against close() then one in_flight() read, two pinned threads) shows it: its reference run, now with a release close, finds witnesses (a test-only close-release policy finds one about every hundred iterations on this CPU). Like the litmus check, it runs only with DC_MATRIX=1 in the environment of tools/mutate.py (tests/conftest.py skips the hardware and tools tests otherwise). litmus7 shows the same outcome for tests/litmus/gate_sb_acqrel.litmus."
