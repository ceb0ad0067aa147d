# SPDX-License-Identifier: Apache-2.0
"""The C-API host drops a cleanup's exception instead of reporting it."""

FILE = "src/cpython/host.cpp"
FIND = """\
  if (PyErr_Occurred()) g_interrupts.report(nullptr);  // kept, or sys.unraisablehook
"""
REPLACE = """\
  if (PyErr_Occurred()) PyErr_Clear();  // MUTANT: dropped, not reported
"""
PROPERTY = "any other exception a cleanup leaves set goes to sys.unraisablehook"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_examples.py"]
KILLING_TESTS = ["test_example_builds_against_the_installed_wheel_and_its_tests_pass"]
