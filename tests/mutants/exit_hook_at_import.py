# SPDX-License-Identifier: Apache-2.0
"""The exit hook is registered at import (plain LIFO) on every version."""

FILE = "reference/python/deferred_cleanup/__init__.py"
FIND = """\
    try:
        _threading._register_atexit(register_last)
"""
REPLACE = """\
    try:
        _atexit.register(hook)  # MUTANT: registered at import
"""
PROPERTY = "the exit sequence runs after every other atexit handler, each of them once, whatever their registration order (3.10-3.13)"
NOTE = "registered at import, the hook still runs the earlier handlers itself, but re-runs the later ones: the order test sees each handler run twice"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_exit.py -k 'before or every_exit_handler'"]
KILLING_TESTS = ["test_every_exit_handler_runs_once_and_its_graphs_are_released"]
