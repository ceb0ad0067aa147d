# SPDX-License-Identifier: Apache-2.0
"""The exit sequence does not wait for producers inside the in-flight gate."""

FILE = "include/deferred_cleanup/shutdown.hpp"
FIND = "out.gate_clear = wait_gate(q, gate_bound, out.waited_us);"
REPLACE = "out.gate_clear = (static_cast<void>(gate_bound), true);  // MUTANT: no gate wait"
PROPERTY = "shutdown waits for every producer between its gate check and Py_AddPendingCall before the host is marked dead"
KILLED_BY = [
    "cpp-asan",
    "pytest:cp312-pyenv:tests/test_shutdown.py -k final_drain_comes_after_the_gate_wait",
]
# Only the C++ test is named: make test's --fast run skips the pytest check, so
# a pytest name here could not fail there (make mutate still needs the pytest
# check to fail as a whole, KILLED_BY).
KILLING_TESTS = ["Shutdown.WaitsOutAProducerInsideTheGate"]
NOTE = ""
