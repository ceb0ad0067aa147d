# SPDX-License-Identifier: Apache-2.0
"""The Py_AtExit backstop waits its whole bound for each paused driver, as before."""

FILE = "reference/src/exit.cpp"
FIND = """\
  for (auto& d : all) d->wait_idle(left());
"""
REPLACE = """\
  for (auto& d : all)  // MUTANT: the whole bound per driver
    d->wait_idle(std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::nanoseconds(deadline - start)));
  static_cast<void>(left);  // still referenced: _native builds with -Werror
"""
PROPERTY = "the backstop waits at most backstop_wait_s in all, whatever the number of drivers"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_exit.py -k whatever_the_drivers"]
KILLING_TESTS = ["test_exit_waits_as_configured_whatever_the_drivers"]
