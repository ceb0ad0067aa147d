# SPDX-License-Identifier: Apache-2.0
"""The C-API host drops a cleanup's exception instead of reporting it."""

FILE = "src/cpython/interrupt.cpp"
FIND = """\
  bump(counters_.unraisable);
  PyErr_WriteUnraisable(where);
"""
REPLACE = """\
  bump(counters_.unraisable);
  PyErr_Clear();  // MUTANT: dropped
  static_cast<void>(where);
"""
PROPERTY = "any other exception a cleanup leaves set goes to sys.unraisablehook"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_examples.py"]
KILLING_TESTS = ["test_example_builds_against_the_installed_wheel_and_its_tests_pass"]
