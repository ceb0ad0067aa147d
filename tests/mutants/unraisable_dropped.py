# SPDX-License-Identifier: Apache-2.0
"""An ordinary exception of a cleanup is cleared instead of reported."""

FILE = "src/cpython/interrupt.cpp"
FIND = """\
  PyErr_WriteUnraisable(where);
  return interrupt;
}
"""
REPLACE = """\
  PyErr_Clear();  // MUTANT: dropped, not reported
  static_cast<void>(where);
  return interrupt;
}
"""
PROPERTY = "an exception a cleanup raises (other than the delivered interrupt) goes to sys.unraisablehook; the drain continues"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_drain.py tests/test_interrupt.py -k unraisablehook"]
KILLING_TESTS = [
    "test_raising_finalizer_goes_to_unraisablehook_and_drain_continues",
    "test_ordinary_exceptions_still_go_to_unraisablehook",
]
