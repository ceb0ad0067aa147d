# SPDX-License-Identifier: Apache-2.0
"""The pending call clears scheduled_ after its drain instead of before."""

FILE = "include/deferred_cleanup/drain.hpp"
FIND = "      q.clear();  // before the take: consumer half of the store-buffering pair\n    }\n    // A superseded call does not clear: the claim's call is still coming and\n    // will clear-then-take; draining without clearing is a direct drain.\n    drain_all(q);\n"
REPLACE = "    }\n    drain_all(q);\n    if (current) {\n      q.clear();  // MUTANT: after the take\n    }\n"
PROPERTY = "the drain releases the claim before it takes, so a producer its takes miss schedules anew (no lost wakeup, even under seq_cst)"
KILLED_BY = ["cpp-asan"]
KILLING_TESTS = ["Core/reference.ItemPushedDuringADrainIsTakenOrRescheduled"]
NOTE = "Killed on the policy core by a producer started from a cleanup inside the real drain (Core/reference.ItemPushedDuringADrainIsTakenOrRescheduled)."
