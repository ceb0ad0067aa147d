# SPDX-License-Identifier: Apache-2.0
"""A drain never stops early: an interrupt raised by a cleanup waits for the whole drain."""

FILE = "include/deferred_cleanup/drain.hpp"
FIND = """\
    if (stopped != nullptr && host.stop_drain != nullptr && host.stop_drain()) {
"""
REPLACE = """\
    if (stopped != nullptr && host.stop_drain != nullptr && false) {  // MUTANT: never stops
"""
PROPERTY = (
    "a cleanup's KeyboardInterrupt or SystemExit stops the drain early and is delivered at once"
)
KILLED_BY = ["cpp", "pytest:cp312-pyenv:tests/test_interrupt.py -k 'stops_the_drain or slow_drain'"]
KILLING_TESTS = ["Core/reference.AStoppedDrainPutsTheRestBackInOrderWithAPendingCall"]
NOTE = "make test's fast subset runs the C++ check only (the fake host's stop_drain stops the drain after its second cleanup); make mutate also runs the pytest check, where test_ctrl_c_in_a_finalizer_stops_the_drain_and_leaves_the_rest_queued and test_sigint_during_a_slow_drain_arrives_at_once_and_the_pending_call_finishes_it fail on it."
