# SPDX-License-Identifier: Apache-2.0
"""Graph no longer visits the objects of the payloads it owns."""

FILE = "reference/src/api_bindings.cpp"
FIND = """\
    Py_VISIT(p->obj);
    Py_VISIT(p->finalizer);
"""
REPLACE = """\
    (void)p;  // MUTANT: invisible to the collector
"""
PROPERTY = "a payload that references its own graph is collected and released"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_gc.py"]
KILLING_TESTS = ["test_payload_referencing_its_graph_is_collected_and_released"]
