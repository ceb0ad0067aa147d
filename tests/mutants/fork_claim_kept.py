# SPDX-License-Identifier: Apache-2.0
"""A fork() child keeps the parent's claim (scheduled_ not reset)."""

FILE = "include/deferred_cleanup/queue.hpp"
FIND = """\
    scheduled_.store(false, std::memory_order_relaxed);
    rearm.reset_after_fork();  // re-arming: no record or stale clock survives in the child
"""
REPLACE = """\
    // MUTANT: the parent's claim stays: the child's handler cannot schedule
    rearm.reset_after_fork();  // re-arming: no record or stale clock survives in the child
"""
PROPERTY = (
    "items queued in the parent at fork() are cleaned in the child by a pending call, "
    "with no new payload and no entry point there (every call record reset in the child)"
)
KILLED_BY = ["cpp", "pytest:cp312-pyenv:tests/test_fork.py -k queued_at_fork"]
KILLING_TESTS = ["Fork.AChildKeepsTheQueuedItemsButNoClaimAndNoProducerOfTheParent"]
NOTE = "make test's fast subset runs the C++ check only (there the child schedule() finds the parent's claim and adds no call); make mutate also runs the pytest check, where test_child_cleans_items_queued_at_fork_without_new_payloads fails on it."
