# SPDX-License-Identifier: Apache-2.0
"""KeyboardInterrupt/SystemExit raised by a cleanup go to sys.unraisablehook."""

FILE = "src/cpython/interrupt.cpp"
FIND = """\
  if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt) || PyErr_ExceptionMatches(PyExc_SystemExit)) {
"""
REPLACE = """\
  if (false) {  // MUTANT: swallowed as before
"""
PROPERTY = "Ctrl-C and sys.exit() raised inside a cleanup reach the program when the drain stops"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_interrupt.py"]
KILLING_TESTS = ["test_ctrl_c_in_a_finalizer_stops_the_drain_and_leaves_the_rest_queued"]
