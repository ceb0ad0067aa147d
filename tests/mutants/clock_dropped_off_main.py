# SPDX-License-Identifier: Apache-2.0
"""A producer whose take_supersede fails keeps the stale claim's clock (drops it)."""

FILE = "include/deferred_cleanup/rearm.hpp"
FIND = """\
    r.start_stale_clock(old_seq, seen);  // give the stale claim back, still stale
"""
REPLACE = """\
    (void)seen;  // MUTANT: the clock stays taken (0): the claim never looks stale again
"""
PROPERTY = "a look at a stale claim that may not re-arm leaves it stale for the next main-thread entry point"
NOTE = (
    "spin's trail (tests/model, two lost calls with the main-thread re-arm): the entry point found no stale claim. "
    "In the C++ the branch is reached only when take_supersede fails after the relaxed pre-check read no record, "
    "a window no deterministic test of the real code can open (the GoogleTest suite passes on this mutant); "
    "the order check binds the code to the model, which covers it"
)
KILLED_BY = ["text:tests/test_model_code.py"]
KILLING_TESTS = ["test_rearm_leaves_the_clock_of_a_claim_it_may_not_rearm"]
