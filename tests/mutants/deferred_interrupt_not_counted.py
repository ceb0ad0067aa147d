# SPDX-License-Identifier: Apache-2.0
"""An interrupt delivered by a pending call is not counted."""

FILE = "src/cpython/interrupt.cpp"
FIND = """\
  bump(counters_.delivered);  // an interrupt delivered
"""
REPLACE = """\
  // MUTANT: deferred_interrupts not counted
"""
PROPERTY = "deferred_interrupts counts the interrupts delivered, also by a pending call"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_interrupt.py -k never_lost"]
KILLING_TESTS = ["test_two_interrupts_are_never_lost"]
