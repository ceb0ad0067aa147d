# SPDX-License-Identifier: Apache-2.0
"""The Py_AtExit backstop reports no leaked item."""

FILE = "include/deferred_cleanup/shutdown.hpp"
FIND = """\
  const std::uint64_t leaked = q.count_queued();  // leaked on purpose: never touched
"""
REPLACE = """\
  const std::uint64_t leaked = 0;  // MUTANT: the still-queued items are not counted
"""
PROPERTY = "the backstop counts the items still queued after teardown as leaked (leaked_at_shutdown), without taking them"
KILLED_BY = [
    "cpp",
    "pytest:cp312-pyenv:tests/test_shutdown.py -k 'callbacks_after_finalization and reference'",
]
KILLING_TESTS = ["BackstopCountsWithoutTaking"]
