# SPDX-License-Identifier: Apache-2.0
"""A main-thread entry point of the reference no longer drains directly."""

FILE = "include/deferred_cleanup/drain.hpp"
FIND = "        drain_all(q);  // gh-95820: do not wait for a pending call that may starve\n"
REPLACE = "        // MUTANT: no direct drain\n"
PROPERTY = "a main-thread entry point drains at once, bounding the delay where pending calls starve (gh-95820, 3.10-3.12)"
KILLED_BY = [
    "cpp-asan",
    "pytest:cp312-pyenv:tests/test_drain.py -q -k 'entry_point or bounded_delay'",
]
KILLING_TESTS = ["Core/reference.RefusalGivesTheClaimBackAndKeepsTheItem"]
NOTE = "Also killed by the Python suite on 3.12 against the rebuilt extension (make mutate; make test's fast subset runs the C++ check only)."
