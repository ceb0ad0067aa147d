# SPDX-License-Identifier: Apache-2.0
"""A producer leaves the gate with a relaxed decrement instead of a release."""

FILE = "include/deferred_cleanup/queue.hpp"
FIND = """\
    in_flight_.fetch_sub(1, std::memory_order_release);
"""
REPLACE = """\
    in_flight_.fetch_sub(1, std::memory_order_relaxed);  // MUTANT: relaxed gate leave
"""
PROPERTY = "a producer's gate leave is a release, so its host call happens-before shutdown proceeds past the gate wait"
KILLED_BY = ["litmus"]
KILLING_TESTS = ["test_litmus_files_match_the_policies"]
NOTE = "x86 cannot show it (every RMW is a full barrier there); the litmus tag check binds the line after `litmus-mp: gate.leave` to the release of tests/litmus"
