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
KILLED_BY = ["pytest:cp312-pyenv:tests/test_interrupt.py -k ordinary_exceptions"]
KILLING_TESTS = ["test_ordinary_exceptions_still_go_to_unraisablehook"]
