# SPDX-License-Identifier: Apache-2.0
"""A second KeyboardInterrupt/SystemExit of one drain is dropped, not reported."""

FILE = "src/cpython/interrupt.cpp"
FIND = """\
    bump(counters_.later_interrupts);  // a later interrupt of the drain
  }
"""
REPLACE = """\
    bump(counters_.later_interrupts);  // a later interrupt of the drain
    PyErr_Clear();  // MUTANT: the later interrupt is dropped
    return true;
  }
"""
PROPERTY = "of the interrupts raised by one drain's cleanups, each after the first goes to sys.unraisablehook"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_exit.py -k later_interrupts"]
KILLING_TESTS = ["test_later_interrupts_of_the_exit_sequence_go_to_unraisablehook"]
