# SPDX-License-Identifier: Apache-2.0
"""A drain that stops early drops the cleanups it did not run instead of putting them back."""

FILE = "include/deferred_cleanup/drain.hpp"
FIND = """\
    q.push(rest);  // pushed oldest first: the next take_all() returns them in order
"""
REPLACE = """\
    (void)q;  // MUTANT: the rest is dropped
"""
PROPERTY = "the cleanups a stopped drain did not run stay queued and still run once each"
KILLED_BY = ["cpp", "pytest:cp312-pyenv:tests/test_interrupt.py -k stops_the_drain"]
KILLING_TESTS = ["Core/reference.AStoppedDrainPutsTheRestBackInOrderWithAPendingCall"]
NOTE = "make test's fast subset runs the C++ check only (the fake host's stop_drain stops the drain after its second cleanup); make mutate also runs the pytest check, where test_ctrl_c_in_a_finalizer_stops_the_drain_and_leaves_the_rest_queued fails on it."
