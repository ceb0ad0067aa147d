# SPDX-License-Identifier: Apache-2.0
"""without_gil() takes the GIL back even once the interpreter is finalizing."""

FILE = "reference/src/host.hpp"
FIND = "      if (interpreter_finalizing()) park_forever();\n"
REPLACE = "      // MUTANT: no park; PyEval_RestoreThread during finalization\n"
PROPERTY = "a thread that returns from one of the module's blocking calls once the interpreter is finalizing parks instead of taking the GIL back"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_shutdown.py -k parks_at_finalization"]
KILLING_TESTS = ["test_a_daemon_thread_inside_a_blocking_call_parks_at_finalization"]
NOTE = "On the interpreters here CPython ends or hangs such a thread without aborting the process, so the exit status shows nothing; the park counter (daemon_parks, in the exit counters) does."
