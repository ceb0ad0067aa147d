# SPDX-License-Identifier: Apache-2.0
"""The exit hook runs its sequence again when called a second time."""

FILE = "reference/src/exit.cpp"
FIND = """\
  if (g_exit.ran || !q.host_alive()) {
    d["already_done"] = true;
"""
REPLACE = """\
  if (!q.host_alive()) {  // MUTANT: runs again
    d["already_done"] = true;
"""
PROPERTY = "the exit sequence is idempotent: a second call does nothing"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_exit.py -k second_exit_sequence"]
KILLING_TESTS = ["test_a_second_exit_sequence_does_nothing"]
