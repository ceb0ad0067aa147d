# SPDX-License-Identifier: Apache-2.0
"""The shared exit wait (src/cpython/exit_phase.cpp) ends as soon as an
interrupt is kept, also one a cleanup raised: destructors that become due
after it, within exit_wait_s, are no longer released."""

FILE = "src/cpython/exit_phase.cpp"
FIND = """\
    if (!drain_and_due(ctx) || steady_ns() - start >= bound_ns) return;
"""
REPLACE = """\
    if (!drain_and_due(ctx) || rule.kept() || steady_ns() - start >= bound_ns) return;  // MUTANT
"""
PROPERTY = "a cleanup's KeyboardInterrupt/SystemExit does not end the exit wait: what becomes due within exit_wait_s is still released"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_exit.py -k later_interrupts"]
KILLING_TESTS = ["test_later_interrupts_of_the_exit_sequence_go_to_unraisablehook"]
