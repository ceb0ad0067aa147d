# SPDX-License-Identifier: Apache-2.0
"""The probe's comparison looks only at the table's fields: a measured field with no row passes."""

FILE = "reference/python/deferred_cleanup/report.py"
FIND = """\
    for field in dict.fromkeys([*cpython_facts.FIELDS, *measured]):
"""
REPLACE = """\
    for field in cpython_facts.FIELDS:  # MUTANT: measured fields with no row are not compared
"""
PROPERTY = "probe --check reports by name a measured field that has no row in the expected table"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_probe.py -k has_no_row"]
KILLING_TESTS = ["test_check_exits_1_when_a_measured_field_has_no_row"]
