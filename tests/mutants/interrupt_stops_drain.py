# SPDX-License-Identifier: Apache-2.0
"""After a cleanup raised KeyboardInterrupt/SystemExit, the later finalizers of the drain are skipped."""

FILE = "reference/src/host.cpp"
FIND = """\
    if (p->finalizer != nullptr) {
      PyObject* r = PyObject_CallOneArg(p->finalizer, p->obj);
"""
REPLACE = """\
    if (p->finalizer != nullptr && g_deferred_type == nullptr) {  // MUTANT: stop after an interrupt
      PyObject* r = PyObject_CallOneArg(p->finalizer, p->obj);
"""
PROPERTY = "a finalizer that raises KeyboardInterrupt or SystemExit does not stop the drain: the remaining cleanups still run once each"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_interrupt.py -k 'ctrl_c or system_exit'"]
KILLING_TESTS = ["test_system_exit_in_a_finalizer_reaches_the_program"]
