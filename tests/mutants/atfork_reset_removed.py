# SPDX-License-Identifier: Apache-2.0
"""The at-fork handler no longer resets the queue in the child."""

FILE = "reference/src/fork.cpp"
FIND = """\
  with_queue([same](auto& q) {
    q.reset_after_fork(same);
  });
"""
REPLACE = """\
  (void)same;  // MUTANT: no reset in the child
"""
PROPERTY = (
    "a fork() child starts with no producer in the gate, no claim and no drain it cannot finish"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_fork.py"]
KILLING_TESTS = ["test_child_cleans_new_payloads"]
