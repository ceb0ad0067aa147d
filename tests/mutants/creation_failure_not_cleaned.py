# SPDX-License-Identifier: Apache-2.0
"""A payload whose user object could not be created is never cleaned on the main thread."""

FILE = "reference/src/host.cpp"
FIND = """\
      cleanup_directly(q, &p->item);
"""
REPLACE = """\
      static_cast<void>(q);  // MUTANT: the uncreated payload is not cleaned
"""
PROPERTY = "a user object that could not be created is cleaned exactly once, at once, on the main thread (DriverError raised)"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_item.py -k creation_failure"]
KILLING_TESTS = ["test_creation_failure_cleans_directly_exactly_once"]
