# SPDX-License-Identifier: Apache-2.0
"""A fork() child keeps the parent's count of producers inside the gate."""

FILE = "include/deferred_cleanup/queue.hpp"
FIND = """\
    in_flight_.store(0, std::memory_order_relaxed);
    // One thread in the child.
    scheduled_.store(false, std::memory_order_relaxed);
"""
REPLACE = """\
    // MUTANT: the parent's producers inside the gate stay counted in the child
    scheduled_.store(false, std::memory_order_relaxed);
"""
PROPERTY = (
    "a fork() child counts no producer inside the gate: the threads of the parent's do not exist "
    "there, so its exit must not wait for them"
)
KILLED_BY = ["cpp", "pytest:cp312-pyenv:tests/test_fork.py -k gate"]
KILLING_TESTS = ["Fork.AChildKeepsTheQueuedItemsButNoClaimAndNoProducerOfTheParent"]
NOTE = "make test's fast subset runs the C++ check only (there in_flight() stays 1 and the child's exit waits its whole bound with the gate not clear); make mutate also runs the pytest check, where test_child_cleans_new_payloads[gate] fails on it: the child's exit waits out its gate bound (5 s) for a producer that does not exist there."
