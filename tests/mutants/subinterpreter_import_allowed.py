# SPDX-License-Identifier: Apache-2.0
"""The package imports in a subinterpreter."""

FILE = "reference/python/deferred_cleanup/__init__.py"
FIND = """\
if not _in_main_interpreter():
"""
REPLACE = """\
if False:  # MUTANT: imported in any interpreter
"""
PROPERTY = "importing the module in a subinterpreter raises ImportError and leaves the process-wide queue alone"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_api.py -k subinterpreter"]
KILLING_TESTS = ["test_import_in_a_subinterpreter_is_refused_and_leaves_the_queue_alone"]
