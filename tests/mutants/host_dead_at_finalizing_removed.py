# SPDX-License-Identifier: Apache-2.0
"""The host is no longer marked dead when CPython starts finalizing."""

FILE = "reference/src/exit.cpp"
FIND = """\
  if (finalizing_now() && g_reference->host_alive()) g_reference->mark_host_dead();
"""
REPLACE = """\
  (void)0;  // MUTANT: alive until the Py_AtExit backstop
"""
PROPERTY = "once CPython is finalizing, no pending call or entry point runs a cleanup (step 4 of the exit sequence)"
NOTE = (
    "a finalizer during module teardown calls drain_now(): it must raise ShutdownError, not drain"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_shutdown.py -k after_shutdown"]
KILLING_TESTS = ["test_api_after_shutdown"]
