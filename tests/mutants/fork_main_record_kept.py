# SPDX-License-Identifier: Apache-2.0
"""A fork() child keeps the parent's record of the main thread's call past the bound."""

FILE = "include/deferred_cleanup/rearm_state.hpp"
FIND = """\
    main_seq_.store(0, std::memory_order_relaxed);
    // One thread in the child.
    claimed_at_ns_.store(0, std::memory_order_relaxed);
"""
REPLACE = """\
    // MUTANT: the parent's main-thread record stays: no main-thread call past the bound
    // One thread in the child.
    claimed_at_ns_.store(0, std::memory_order_relaxed);
"""
PROPERTY = (
    "a fork() child inherits no main-thread call record: after two lost calls in the child, a "
    "main-thread entry point adds its call past the bound and later payloads are released by "
    "a pending call"
)
KILLED_BY = ["cpp", "pytest:cp312-pyenv:tests/test_fork.py -k rearm_records"]
KILLING_TESTS = ["RearmPastTheBound.AForkChildInheritsNoCallRecordAndRecoversItsOwnLostCalls"]
NOTE = (
    "make test's fast subset runs the C++ check only (there the child's main-thread entry point may not add its call past the bound); make mutate also runs the pytest check, where test_child_rearms_with_the_parents_rearm_records_reset[main] fails on it: the record names a parent's call that does not exist in the child; only a newer call "
    "running there clears it, so the child must lose its own calls too"
)
