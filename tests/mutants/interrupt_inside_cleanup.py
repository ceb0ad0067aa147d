# SPDX-License-Identifier: Apache-2.0
"""An entry point inside a cleanup raises the saved KeyboardInterrupt/SystemExit there."""

FILE = "src/cpython/interrupt.cpp"
FIND = """\
  if (depth_ > 0) return 0;  // inside a cleanup: the outermost drain raises it
"""
REPLACE = """\
  // MUTANT: an entry point inside a cleanup delivers the saved interrupt to that cleanup
"""
PROPERTY = (
    "the first KeyboardInterrupt/SystemExit of a drain is raised where the outermost drain "
    "was entered, never inside a later cleanup (the interrupt rule, docs/caveats.rst)"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_interrupt.py"]
KILLING_TESTS = ["test_an_entry_point_inside_a_cleanup_does_not_take_the_interrupt"]
