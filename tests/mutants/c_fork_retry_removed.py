# SPDX-License-Identifier: Apache-2.0
"""The C-API host's fork handler resets the queue but schedules no drain of
the items the child inherited."""

FILE = "src/cpython/fork.cpp"
FIND = """\
  if (!g.queue->empty_snapshot()) retry_schedule(*g.queue);
"""
REPLACE = """\
  // MUTANT: no drain scheduled for the inherited items
"""
PROPERTY = "an item queued at the fork is cleaned in the parent and in the child"
NOTE = "killed only where the child inherits no pending call of the host's: CPython's ring was full at the hand-offs, then emptied before the fork"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_capi.py -k no_pending_call_at_fork"]
KILLING_TESTS = ["test_items_queued_with_no_pending_call_at_fork_are_cleaned_in_the_child"]
