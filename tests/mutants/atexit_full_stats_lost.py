# SPDX-License-Identifier: Apache-2.0
"""With the Py_AtExit table full, the exit counters are written nowhere."""

FILE = "reference/src/exit.cpp"
FIND = """\
  if (g_atexit_rc == 0 || written || g_stats_path[0] == '\\0') return;
"""
REPLACE = """\
  (void)written;  // MUTANT: no backstop, no exit counters
  return;
"""
PROPERTY = (
    "with CPython's Py_AtExit table full the exit counters (DC_STATS_AT_EXIT) are still written"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_exit.py -k full_py_atexit"]
KILLING_TESTS = ["test_a_full_py_atexit_table_is_said_once_and_the_exit_counters_stay"]
