# SPDX-License-Identifier: Apache-2.0
"""A main-thread entry point no longer re-arms past the bound: two consecutive lost calls turn the pending-call path off."""

FILE = "include/deferred_cleanup/drain.hpp"
FIND = """\
        rearm_if_stale(q, !q.draining());
"""
REPLACE = """\
        rearm_if_stale(q);  // MUTANT: never past the bound (as a producer)
"""
PROPERTY = "after two consecutive lost calls (a claim's call and its re-arm's call) the next main-thread entry point adds one call past the bound, and the next enqueue is cleaned by a pending call"
KILLED_BY = ["cpp", "pytest:cp312-pyenv:tests/test_rearm.py"]
# Only the cpp check's tests: `--fast` (make test) skips the pytest check when a
# mutant names another, and the pytest check must fail as a whole anyway
# (tests/test_rearm.py: test_two_lost_calls_then_one_main_thread_entry_point_...).
KILLING_TESTS = [
    "RearmPastTheBound.TwoLostCallsThenAMainThreadEntryPoint",
    "RearmPastTheBound.ThreeLostCallsThenMainThreadEntryPoints",
]
NOTE = "before the rule, the limit the docs stated: the superseded record is cleared only by a newer call that runs, so with both calls lost no producer may re-arm again"
