# SPDX-License-Identifier: Apache-2.0
"""An int parameter exactly at its documented upper bound is refused (off by one)."""

FILE = "reference/src/host.cpp"
FIND = """\
  if (overflow != 0 || n < lo || n > hi)
"""
REPLACE = """\
  if (overflow != 0 || n < lo || n >= hi)  // MUTANT: the upper bound itself refused
"""
PROPERTY = "every int parameter accepts the bounds of its documented range"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_arg_types.py -k documented_bound"]
KILLING_TESTS = ["test_a_value_at_a_documented_bound_is_accepted"]
