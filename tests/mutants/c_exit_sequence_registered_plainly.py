# SPDX-License-Identifier: Apache-2.0
"""The C-API host registers its exit sequence with a plain atexit.register at
dc_host_get() on every version, not through the shared last-registration."""

FILE = "src/cpython/exit.cpp"
FIND = """\
  const int rc = register_exit_sequence(sequence);
"""
REPLACE = """\
  PyObject* atexit = PyImport_ImportModule("atexit");  // MUTANT: plain LIFO at get()
  PyObject* r =
      atexit != nullptr ? PyObject_CallMethod(atexit, "register", "O", sequence) : nullptr;
  Py_XDECREF(atexit);
  const int rc = r == nullptr ? -1 : 0;
  Py_XDECREF(r);
"""
PROPERTY = "Registers the atexit-phase exit sequence (3.10-3.13: after every other atexit handler)"
NOTE = "3.14+ registers at get() by design, so only a 3.10-3.13 check can kill it: a handler registered before dc_host_get() then runs after the sequence and its item is never cleaned"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_capi.py -k atexit_handlers"]
KILLING_TESTS = ["test_the_exit_sequence_runs_after_the_users_other_atexit_handlers"]
