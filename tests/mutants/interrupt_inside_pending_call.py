# SPDX-License-Identifier: Apache-2.0
"""A pending call that runs inside a cleanup delivers the saved KeyboardInterrupt/SystemExit there."""

FILE = "src/cpython/interrupt.cpp"
FIND = """\
  if (depth_ > 0) return 0;  // inside a cleanup: the outermost drain delivers it
"""
REPLACE = """\
  // MUTANT: a nested pending call delivers the saved interrupt inside the running cleanup
"""
PROPERTY = (
    "a pending call that runs inside a cleanup raises no saved KeyboardInterrupt/SystemExit: "
    "the outermost drain does (the interrupt rule, docs/caveats.rst)"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_interrupt.py"]
KILLING_TESTS = ["test_a_pending_call_inside_a_cleanup_does_not_take_the_interrupt"]
