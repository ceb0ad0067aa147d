"""Store buffering, gate.close: the reference's order weakened to release."""
FILE = 'reference/include/deferred_cleanup/policy.hpp'
FIND = '/// [litmus:gate.close]\n  static constexpr std::memory_order gate_close = std::memory_order_seq_cst;'
REPLACE = '/// [litmus:gate.close]\n  static constexpr std::memory_order gate_close = std::memory_order_release;'
PROPERTY = "shutdown's close (store to accepting_) is release instead of seq_cst (a producer may call the host after shutdown read the gate empty, herd7: tests/litmus/gate_sb_*.litmus)"
KILLED_BY = ["litmus"]
KILLING_TESTS = ["test_litmus_files_match_the_policies"]
NOTE = 'The one pair x86 CAN reorder: a plain store (release) followed by a plain load (gate.wait), so shutdown may read in_flight_ == 0 while its close still sits in the store buffer and a producer enters and reads accepting_ == true. The orders are compile-time constants now, so the release build emits exactly that shape; no hardware stress test of close()+in_flight() against gate_enter() is built yet (litmus7 shows the outcome on this CPU for tests/litmus/gate_sb_acqrel.litmus).'
