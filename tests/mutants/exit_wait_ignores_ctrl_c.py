# SPDX-License-Identifier: Apache-2.0
"""The shared exit wait (src/cpython/exit_phase.cpp) no longer runs CPython's
signal handlers between its sleeps: Ctrl-C during the reference module's exit
wait is not seen until the wait's bound."""

FILE = "src/cpython/exit_phase.cpp"
FIND = """\
    if (PyErr_CheckSignals() != 0 && rule.report(nullptr)) return;  // Ctrl-C: ends the wait
"""
REPLACE = """\
    static_cast<void>(rule);  // MUTANT: no signal handlers during the exit wait
"""
PROPERTY = "a Ctrl-C during the reference's exit wait ends the wait; the rest of the exit sequence still runs, and the KeyboardInterrupt is raised at its end"
NOTE = "the same line as c_exit_wait_ignores_ctrl_c (one wait, shared); this one is judged by the reference module's test"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_exit.py -k ctrl_c"]
KILLING_TESTS = ["test_ctrl_c_during_the_exit_wait_ends_it_and_the_sequence_still_runs"]
