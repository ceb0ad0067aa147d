# SPDX-License-Identifier: Apache-2.0
"""The C-API host's pending call returns -1 with a cleanup's interrupt set
also in CPython's exit-time flush (it delivers instead of asking the rule)."""

FILE = "src/cpython/host.cpp"
FIND = """\
int host_after_drain() { return g_interrupts.after_drain(); }
"""
REPLACE = """\
int host_after_drain() { return g_interrupts.deliver(); }  // MUTANT: -1 also in the flush
"""
PROPERTY = (
    "the C-API host holds a cleanup's KeyboardInterrupt/SystemExit in CPython's exit-time flush "
    "for the exit sequence, never a SystemError"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_examples.py -k c_threadpool"]
KILLING_TESTS = ["test_example_builds_against_the_installed_wheel_and_its_tests_pass"]
NOTE = "3.10-3.13 (a -1 in the flush becomes a SystemError there): examples/c_threadpool's test reaches the flush by construction (threading._shutdown replaced by C callables that end with a completion)"
