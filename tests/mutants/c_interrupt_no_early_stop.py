# SPDX-License-Identifier: Apache-2.0
"""The C-API host never stops a drain early: Ctrl-C waits for the whole drain."""

FILE = "src/cpython/host.cpp"
FIND = """\
  h.stop_drain = &host_stop_drain;  // in_gate and finalizing stay nullptr
"""
REPLACE = """\
  h.stop_drain = nullptr;  // MUTANT: never stops early
  (void)&host_stop_drain;   // still referenced: _native builds src/cpython with -Werror
"""
PROPERTY = (
    "the C-API host stops a drain at the first KeyboardInterrupt/SystemExit and raises it at once"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_examples.py -k c_threadpool"]
KILLING_TESTS = ["test_example_builds_against_the_installed_wheel_and_its_tests_pass"]
