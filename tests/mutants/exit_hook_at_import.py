# SPDX-License-Identifier: Apache-2.0
"""The exit hook is registered at import (plain LIFO) on every version."""

FILE = "src/cpython/exit_phase.cpp"
FIND = """\
  const int rc = call_with("threading", "_register_atexit", later);
"""
REPLACE = """\
  const int rc = register_last(capsule, nullptr) == nullptr ? -1 : 0;  // MUTANT: registered at import
"""
PROPERTY = "the exit sequence runs after every other atexit handler, each of them once, whatever their registration order (3.10-3.13)"
NOTE = "registered at import, the hook still runs the earlier handlers itself, but re-runs the later ones: the order test sees each handler run twice"
KILLED_BY = [
    "pytest:cp312-pyenv:tests/test_exit.py -k 'before or every_exit_handler'",
    "pytest:cp312-pyenv:tests/test_capi.py -k atexit_handlers",
]
KILLING_TESTS = [
    "test_every_exit_handler_runs_once_and_its_graphs_are_released",
    "test_the_exit_sequence_runs_after_the_users_other_atexit_handlers",
]
