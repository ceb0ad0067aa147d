# SPDX-License-Identifier: Apache-2.0
"""interrupts_unraisable counts every unraisable cleanup error, not only the later interrupts."""

FILE = "src/cpython/interrupt.cpp"
FIND = """\
    bump(counters_.later_interrupts);  // a later interrupt of the drain
  }
  bump(counters_.unraisable);
"""
REPLACE = """\
  }
  bump(counters_.later_interrupts);  // MUTANT: any error
  bump(counters_.unraisable);
"""
PROPERTY = (
    "interrupts_unraisable counts the later interrupts of a drain reported to "
    "sys.unraisablehook, never an ordinary cleanup error"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_interrupt.py -k ordinary_exceptions"]
KILLING_TESTS = ["test_ordinary_exceptions_still_go_to_unraisablehook"]
