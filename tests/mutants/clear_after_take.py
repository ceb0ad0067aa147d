"""The pending call clears scheduled_ after its drain instead of before."""
FILE = 'reference/include/deferred_cleanup/drain.hpp'
FIND = "      q.clear();  // before the take: consumer half of the store-buffering pair\n    }\n    // A superseded call does not clear: the claim's call is still coming and\n    // will clear-then-take; draining without clearing is a direct drain.\n    drain_all(q);\n"
REPLACE = '    }\n    drain_all(q);\n    if (current) {\n      q.clear();  // MUTANT: after the take\n    }\n'
PROPERTY = "the drain releases the claim before it takes, so a producer its takes miss schedules anew (no lost wakeup, even under seq_cst)"
KILLED_BY = ["cpp-asan"]
KILLING_TESTS = []  # re-point to the test written for it (tests/cpp was rewritten on the policy core)
NOTE = "Deterministic kill: a producer started from a cleanup finds the claim still held. Handshake.RacingPushAtTheEndOfADrainNeverStrands strands an item on it only when a push lands between the last take and the clear (probabilistic: listed when it does; on a loaded 2-core machine it rarely does)."
