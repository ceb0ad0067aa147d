# SPDX-License-Identifier: Apache-2.0
"""The at-fork reset is not counted in the child's stats()."""

FILE = "include/deferred_cleanup/queue.hpp"
FIND = """\
    stats.forks.fetch_add(1, std::memory_order_relaxed);  // statistics only
"""
REPLACE = """\
    // MUTANT: the reset is not counted
"""
PROPERTY = "stats()['forks'] counts the at-fork resets: one more in the child than in its parent"
KILLED_BY = ["cpp", "pytest:cp312-pyenv:tests/test_fork.py -k rearm_records"]
KILLING_TESTS = ["Fork.AChildKeepsTheQueuedItemsButNoClaimAndNoProducerOfTheParent"]
NOTE = "make test's fast subset runs the C++ check only (there stats.forks stays 0); make mutate also runs the pytest check, where test_child_rearms_with_the_parents_rearm_records_reset fails on it."
