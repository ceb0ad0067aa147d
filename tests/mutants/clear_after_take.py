"""The pending call clears scheduled_ after its drain instead of before."""
FILE = "reference/include/deferred_cleanup/drain.hpp"
FIND = """\
  queue.clear_schedule();  // before the take: consumer half of the store-buffering pair
  drain_all(queue);
"""
REPLACE = """\
  drain_all(queue);
  queue.clear_schedule();  // MUTANT: after the take
"""
PROPERTY = "the drain releases the claim before it takes, so a producer its takes miss schedules anew (no lost wakeup, even under seq_cst)"
KILLED_BY = ["cpp-asan"]
KILLING_TESTS = ["Handshake.ProducerDuringADrainMakesItsOwnPendingCall"]
NOTE = "Deterministic kill: a producer started from a cleanup finds the claim still held. Handshake.RacingPushAtTheEndOfADrainNeverStrands strands an item on it only when a push lands between the last take and the clear (probabilistic: listed when it does; on a loaded 2-core machine it rarely does)."
