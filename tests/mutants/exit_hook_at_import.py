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
PROPERTY = "the exit sequence runs after every other atexit handler, whatever their registration order (3.10-3.13)"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_exit.py -k before"]
KILLING_TESTS = ["test_graph_destroyed_at_exit_releases_every_payload"]
