# SPDX-License-Identifier: Apache-2.0
"""drain_now() returns 0 instead of raising ShutdownError once CPython is finalizing."""

FILE = "reference/src/host.cpp"
FIND = """\
      throw ShutdownError("deferred_cleanup has shut down: nothing is drained any more");
"""
REPLACE = """\
      break;  // MUTANT: silent after shutdown
"""
PROPERTY = (
    "once CPython is finalizing drain_now() raises ShutdownError (nothing is drained any more)"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_shutdown.py -k after_shutdown"]
KILLING_TESTS = ["test_api_after_shutdown"]
