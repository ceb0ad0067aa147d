"""The exit sequence does not wait for producers inside the in-flight gate."""

FILE = "reference/include/deferred_cleanup/shutdown.hpp"
FIND = "out.gate_clear = wait_gate(q, gate_bound, out.waited_us);"
REPLACE = "out.gate_clear = (static_cast<void>(gate_bound), true);  // MUTANT: no gate wait"
PROPERTY = "shutdown waits for every producer between its gate check and Py_AddPendingCall before the host is marked dead"
KILLED_BY = [
    "cpp-asan",
    "pytest:cp312-pyenv:tests/test_shutdown.py -k final_drain_comes_after_the_gate_wait",
]
KILLING_TESTS = [
    "Shutdown.WaitsOutAProducerInsideTheGate",
    "test_reference_final_drain_comes_after_the_gate_wait",
]
NOTE = ""
