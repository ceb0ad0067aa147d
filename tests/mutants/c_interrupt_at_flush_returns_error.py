# SPDX-License-Identifier: Apache-2.0
"""The C-API host's pending call returns -1 with the interrupt set also in CPython's exit-time flush."""

FILE = "src/cpython/host.cpp"
FIND = """\
  if (!python_frame_running()) {
    g.interrupts_held_at_flush.fetch_add(1, std::memory_order_relaxed);  // statistics only
"""
REPLACE = """\
  if (false) {  // MUTANT: -1 also without a Python frame
    g.interrupts_held_at_flush.fetch_add(1, std::memory_order_relaxed);  // statistics only
"""
PROPERTY = (
    "the C-API host holds a cleanup's KeyboardInterrupt/SystemExit in CPython's exit-time flush "
    "for the exit sequence, never a SystemError"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_examples_source_tree.py -k c_threadpool"]
KILLING_TESTS = ["test_example_builds_against_the_source_tree_and_passes_its_tests"]
NOTE = "3.10-3.12: there a foreign thread's pending call often first runs in the flush (gh-95820)"
