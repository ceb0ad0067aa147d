# SPDX-License-Identifier: Apache-2.0
"""counters() is an entry point: it drains on the main thread and retries elsewhere."""

FILE = "reference/src/host.cpp"
FIND = """\
py::dict counters() {
  note_finalizing();
"""
REPLACE = """\
py::dict counters() {
  entry();  // MUTANT: counters() drains
"""
PROPERTY = "counters() is a snapshot: it drains and schedules nothing"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_api.py -k counters_drain"]
KILLING_TESTS = ["test_counters_drains_and_schedules_nothing"]
