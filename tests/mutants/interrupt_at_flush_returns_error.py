# SPDX-License-Identifier: Apache-2.0
"""The pending call returns -1 with the interrupt set also in CPython's exit-time flush."""

FILE = "src/cpython/interrupt.cpp"
FIND = """\
  if (!python_frame_running()) {
    // CPython's exit-time flush: a -1 here would become a SystemError
"""
REPLACE = """\
  if (false) {  // MUTANT: -1 also without a Python frame
    // CPython's exit-time flush: a -1 here would become a SystemError
"""
PROPERTY = "a cleanup's KeyboardInterrupt/SystemExit in CPython's exit-time flush never becomes a SystemError"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_exit.py -k exit_time_flush"]
KILLING_TESTS = ["test_an_interrupt_in_the_exit_time_flush_is_never_a_system_error"]
NOTE = "every interpreter: the scenario reaches the flush by construction (_test_release_at_exit_flush)"
