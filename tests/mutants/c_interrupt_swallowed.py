# SPDX-License-Identifier: Apache-2.0
"""The C-API host sends a cleanup's KeyboardInterrupt to sys.unraisablehook."""

FILE = "src/cpython/interrupt.cpp"
FIND = """\
  if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt) || PyErr_ExceptionMatches(PyExc_SystemExit)) {
    if (type_ == nullptr) {
"""
REPLACE = """\
  if (false) {  // MUTANT: swallowed
    if (type_ == nullptr) {
"""
PROPERTY = "KeyboardInterrupt and SystemExit (the first of a drain) are raised after the drain"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_examples.py"]
KILLING_TESTS = ["test_example_builds_against_the_installed_wheel_and_its_tests_pass"]
