"""A blocking call that released the GIL takes it back during finalization."""

FILE = "reference/src/host.hpp"
FIND = """\
      if (interpreter_finalizing()) park_forever();
"""
REPLACE = """\
      // MUTANT: no park during finalization
"""
PROPERTY = "a blocking call that released the GIL never takes it back once the interpreter is finalizing: a daemon thread in it never aborts exit"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_shutdown.py -k daemon_thread"]
KILLING_TESTS = ["test_daemon_thread_in_a_blocking_call_never_aborts_exit"]
