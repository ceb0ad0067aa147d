# SPDX-License-Identifier: Apache-2.0
"""In a fork() child, the simulated driver keeps counting the destructor
calls that were running on threads the child does not have as due."""

FILE = "reference/src/driver_simulated.cpp"
FIND = "  outstanding_ = due_.size();\n"
REPLACE = "  // MUTANT: the calls lost with their threads stay outstanding\n"
PROPERTY = "a destructor call that was running on a thread that does not exist in the fork() child is never delivered there, and nothing in the child waits for it"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_fork.py -k 'new_payloads and gate'"]
KILLING_TESTS = ["test_child_cleans_new_payloads"]
NOTE = "The child's driver never goes idle: wait_idle() and the exit sequence's wait run to their bounds (5 s each)."
