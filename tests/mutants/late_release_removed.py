# SPDX-License-Identifier: Apache-2.0
"""A graph destroyed after the exit sequence no longer gets the exit wait."""

FILE = "reference/src/exit.cpp"
FIND = """\
  ++g_exit.late_graphs;  // main thread only (GIL)
  g_exit.late_drained += await_due_destructors(q);
"""
REPLACE = """\
  return;  // MUTANT: no wait, no drain for a late destroy
"""
PROPERTY = "payloads of graphs destroyed by atexit handlers that run after the exit hook (3.14+: registered before the import) are released on the main thread"
NOTE = "only 3.14+ runs handlers after the hook (3.10-3.13 run them all before it), so the check runs on 3.14"
KILLED_BY = ["pytest:cp314-sid:tests/test_exit.py -k 'before or every_exit_handler'"]
KILLING_TESTS = [
    "test_graph_destroyed_at_exit_releases_every_payload",
    "test_every_exit_handler_runs_once_and_its_graphs_are_released",
]
