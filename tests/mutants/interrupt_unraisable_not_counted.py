# SPDX-License-Identifier: Apache-2.0
"""A later interrupt reported to sys.unraisablehook is not counted."""

FILE = "src/cpython/interrupt.cpp"
FIND = """\
    bump(counters_.later_interrupts);  // a later interrupt of the drain
"""
REPLACE = """\
    // MUTANT: interrupts_unraisable not counted
"""
PROPERTY = (
    "interrupts_unraisable counts the later interrupts of a drain reported to sys.unraisablehook"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_exit.py -k later_interrupts"]
KILLING_TESTS = ["test_later_interrupts_of_the_exit_sequence_go_to_unraisablehook"]
