# SPDX-License-Identifier: Apache-2.0
"""The C-API host leaves an exception that the user's outstanding() set in
place, and asks it again: the exit sequence returns with the error set and
CPython's finalization fails (exit status 120)."""

FILE = "src/cpython/exit.cpp"
FIND = """\
  if (PyErr_Occurred() != nullptr) {
    g_outstanding_failed = true;
    report_host_error();
    return false;
  }
"""
REPLACE = """\
  // MUTANT: the user's exception left set
"""
PROPERTY = (
    "an exception outstanding() leaves set counts as nothing due and goes to sys.unraisablehook"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_capi.py"]
KILLING_TESTS = ["test_an_outstanding_callback_that_raises_is_reported_once_and_ends_the_wait"]
