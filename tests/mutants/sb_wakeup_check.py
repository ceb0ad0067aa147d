"""Store buffering, wakeup.check: the reference's order weakened to acq_rel."""
FILE = "reference/include/deferred_cleanup/queue.hpp"
FIND = 'scheduled_.exchange(true, order(std::memory_order_seq_cst, std::memory_order_acq_rel)'
REPLACE = 'scheduled_.exchange(true, order(std::memory_order_acq_rel, std::memory_order_acq_rel)'
PROPERTY = "a producer's claim (exchange on scheduled_) is acq_rel instead of seq_cst (the lost wakeup is allowed, herd7: tests/litmus/wakeup_sb_*.litmus)"
KILLED_BY = ["litmus"]
KILLING_TESTS = ["test_reference_litmus_uses_the_headers_orders[wakeup.check]"]
NOTE = 'A locked exchange on x86: no x86 run can show it; tag check only. (Run-time order(): GCC emits the strongest form anyway.)'
