# SPDX-License-Identifier: Apache-2.0
"""The C host's fork() child handler schedules no drain of the items it inherited."""

FILE = "src/cpython/fork.cpp"
FIND = """\
  if (!g.queue->empty_snapshot()) retry_schedule(*g.queue);
"""
REPLACE = """\
  // MUTANT: the inherited items wait for the child's next entry point
"""
PROPERTY = "items queued at fork() are cleaned in the child as well, without an entry point"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_capi.py"]
KILLING_TESTS = ["test_items_queued_at_fork_are_cleaned_in_the_parent_and_in_the_child"]
