# SPDX-License-Identifier: Apache-2.0
"""Graph's traverse also visits the graph itself, a reference it does not own."""

FILE = "reference/src/api_bindings.cpp"
FIND = """\
  Py_VISIT(Py_TYPE(self));  // heap types must visit their type
"""
REPLACE = """\
  Py_VISIT(Py_TYPE(self));  // heap types must visit their type
  Py_VISIT(self);           // MUTANT: a reference the graph does not own
"""
PROPERTY = "a live graph is never collected while something else holds it (its traverse visits only the references it owns)"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_gc.py"]
KILLING_TESTS = ["test_live_graph_is_not_collected"]
