# SPDX-License-Identifier: Apache-2.0
"""Store buffering, wakeup.claim: the reference's order weakened to acq_rel."""

FILE = "include/deferred_cleanup/policy.hpp"
FIND = "/// [litmus:wakeup.claim]\n  static constexpr std::memory_order claim = std::memory_order_seq_cst;"
REPLACE = "/// [litmus:wakeup.claim]\n  static constexpr std::memory_order claim = std::memory_order_acq_rel;"
PROPERTY = "a producer's claim (exchange on scheduled_) is acq_rel instead of seq_cst (the lost wakeup is allowed, herd7: tests/litmus/wakeup_sb_*.litmus)"
KILLED_BY = ["litmus"]
KILLING_TESTS = []  # re-point to the test written for it (tests/cpp was rewritten on the policy core)
NOTE = "A locked exchange (or CAS) on x86: no x86 run can show it; tag check only."
