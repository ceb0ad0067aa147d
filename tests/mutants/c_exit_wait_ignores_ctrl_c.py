# SPDX-License-Identifier: Apache-2.0
"""Step 0 of the C-API host's exit sequence no longer runs CPython's signal
handlers between its sleeps: Ctrl-C during the exit wait is not seen until
the wait's bound."""

FILE = "src/cpython/exit_phase.cpp"
FIND = """\
    if (PyErr_CheckSignals() != 0 && rule.report(nullptr)) return;  // Ctrl-C: ends the wait
"""
REPLACE = """\
    static_cast<void>(rule);  // MUTANT: no signal handlers during the exit wait
"""
PROPERTY = "Ctrl-C during the exit wait ends the wait; the rest of the exit sequence still runs"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_capi.py"]
KILLING_TESTS = ["test_ctrl_c_during_the_exit_wait_ends_it_and_is_shown"]
