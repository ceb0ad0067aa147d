"""Store buffering, gate.enter: the reference's order weakened to acq_rel."""
FILE = "reference/include/deferred_cleanup/queue.hpp"
FIND = 'in_flight_.fetch_add(1, order(std::memory_order_seq_cst, std::memory_order_relaxed)'
REPLACE = 'in_flight_.fetch_add(1, order(std::memory_order_acq_rel, std::memory_order_relaxed)'
PROPERTY = "a producer's gate entry (fetch_add on in_flight_) is acq_rel instead of seq_cst (a producer may call the host after shutdown read the gate empty, herd7: tests/litmus/gate_sb_*.litmus)"
KILLED_BY = ["litmus"]
KILLING_TESTS = ["test_reference_litmus_uses_the_headers_orders[gate.enter]"]
NOTE = 'A locked fetch_add on x86: no x86 run can show it; tag check only. (Run-time order(): GCC emits the strongest form anyway.)'
