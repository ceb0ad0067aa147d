# SPDX-License-Identifier: Apache-2.0
"""The drain's take returns the list newest first (the push order reversed)."""

FILE = "include/deferred_cleanup/queue.hpp"
FIND = """\
    DeferredCleanupItem* fifo = nullptr;
    while (lifo != nullptr) {
"""
REPLACE = """\
    DeferredCleanupItem* fifo = nullptr;
    if (lifo != nullptr) return lifo;  // MUTANT: newest first
    while (lifo != nullptr) {
"""
PROPERTY = "the drain runs the items it takes exactly once each, oldest first (push order)"
KILLED_BY = ["cpp", "pytest:cp312-pyenv:tests/test_queue.py -k push_order"]
KILLING_TESTS = ["TakeAllReturnsPushOrderAndEmptiesTheList"]
