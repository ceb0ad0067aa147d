# SPDX-License-Identifier: Apache-2.0
"""drain_now() returns without draining."""

FILE = "include/deferred_cleanup/drain.hpp"
FIND = """\
  return {DrainNowStatus::drained, drain_all(q)};
"""
REPLACE = """\
  return {DrainNowStatus::drained, 0};  // MUTANT: nothing drained
"""
PROPERTY = "drain_now() runs every queued cleanup now and returns how many ran"
KILLED_BY = ["cpp", "pytest:cp312-pyenv:tests/test_interrupt.py -k ordinary_exceptions"]
KILLING_TESTS = ["Api.HandOffAfterCloseStillPushesAndAMainThreadDrainCleans"]
NOTE = "make test's fast subset runs the C++ check only; make mutate also runs test_interrupt.py's test_ordinary_exceptions_still_go_to_unraisablehook, which fails on it."
