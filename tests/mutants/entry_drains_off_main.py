# SPDX-License-Identifier: Apache-2.0
"""An entry point drains on whatever thread calls it, not only on the main thread."""

FILE = "include/deferred_cleanup/drain.hpp"
FIND = """\
    if (q.host().is_main_thread()) {
      EntryAction done = EntryAction::nothing;
"""
REPLACE = """\
    if (true) {  // MUTANT: an entry point drains on any thread
      EntryAction done = EntryAction::nothing;
"""
PROPERTY = "an entry point off the main thread never drains, it only retries scheduling: cleanups run on the main thread only"
KILLED_BY = [
    "cpp",
    "pytest:cp312-pyenv:tests/test_scheduling.py -k retry_off_main_thread",
]
KILLING_TESTS = ["Core/reference.EntryPointOffTheMainThreadOnlyRetries"]
NOTE = "the Python test sees poll() on a worker thread answer 'drained'"
