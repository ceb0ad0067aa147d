# SPDX-License-Identifier: Apache-2.0
"""The destructor callback drops its item once the gate is closed."""

FILE = "include/deferred_cleanup/callback.hpp"
FIND = """\
  q.push(item);  // step 1: publish the item (wakeup.push)
"""
REPLACE = """\
  if (q.accepting()) q.push(item);  // MUTANT: no push after close
"""
PROPERTY = "the destructor callback pushes its item always, also after shutdown (then only pushes: enqueued_late, leaked once CPython is finalizing)"
KILLED_BY = [
    "cpp",
    "pytest:cp312-pyenv:tests/test_shutdown.py -k 'callbacks_after_finalization and reference'",
]
KILLING_TESTS = ["Shutdown.AfterCloseCallbacksOnlyEnqueueAndAreLeaked"]
