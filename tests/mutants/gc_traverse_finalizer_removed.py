# SPDX-License-Identifier: Apache-2.0
"""Graph visits each payload's object but not its finalizer."""

FILE = "reference/src/api_bindings.cpp"
FIND = """\
    Py_VISIT(p->finalizer);
"""
REPLACE = """\
    // MUTANT: the finalizer is invisible to the collector
"""
PROPERTY = (
    "a cycle through a payload's finalizer alone (a bound method, closure or lambda that "
    "references its own graph) is collected and released"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_gc.py"]
KILLING_TESTS = ["test_a_cycle_through_the_finalizer_alone_is_collected_and_released"]
