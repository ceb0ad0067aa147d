# SPDX-License-Identifier: Apache-2.0
"""A full Py_AtExit table goes unsaid on stderr."""

FILE = "reference/src/exit.cpp"
FIND = """\
  if (g_atexit_rc != 0) {
    std::fprintf(stderr,
"""
REPLACE = """\
  if (false) {  // MUTANT: the full table is not said
    std::fprintf(stderr,
"""
PROPERTY = "with CPython's Py_AtExit table full the module says so once on stderr"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_exit.py -k full_py_atexit"]
KILLING_TESTS = ["test_a_full_py_atexit_table_is_said_once_and_the_exit_counters_stay"]
