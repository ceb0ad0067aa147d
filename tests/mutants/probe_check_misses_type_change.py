# SPDX-License-Identifier: Apache-2.0
"""The probe's comparison compares values as printed: 31 and "31" are the same to it."""

FILE = "reference/python/deferred_cleanup/report.py"
FIND = """\
        if exp != got or type(exp) is not type(got):
"""
REPLACE = """\
        if str(exp) != str(got):  # MUTANT: a change of type is not a difference
"""
PROPERTY = "probe --check reports by name a field whose measured value changed type (31 -> '31')"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_probe.py -k changes_type"]
KILLING_TESTS = ["test_check_exits_1_when_a_field_changes_type"]
