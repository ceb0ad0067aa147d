# SPDX-License-Identifier: Apache-2.0
"""A fork() child keeps the parent's main thread as its main thread."""

FILE = "src/cpython/host_threads.cpp"
FIND = """\
  main_ident = me;  // the forking thread is the child's main thread
"""
REPLACE = """\
  // MUTANT: the parent's main thread stays the main thread in the child
"""
PROPERTY = (
    "the forking thread becomes the child's main thread: a child forked by a worker "
    "releases its payloads on that thread"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_fork.py -k 'new_payloads and worker'"]
KILLING_TESTS = ["test_child_cleans_new_payloads[worker]"]
