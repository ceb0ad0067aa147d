# SPDX-License-Identifier: Apache-2.0
"""A drain that stops early puts the rest back but re-arms no pending call for it."""

FILE = "include/deferred_cleanup/drain.hpp"
FIND = """\
  schedule(q);  // the pending call re-armed for them
"""
REPLACE = """\
  // MUTANT: no pending call re-armed for the rest
"""
PROPERTY = "the rest of a stopped drain has a pending call re-armed: it is released without any entry point"
KILLED_BY = ["cpp", "pytest:cp312-pyenv:tests/test_interrupt.py -k slow_drain"]
KILLING_TESTS = ["Core/reference.AStoppedDrainPutsTheRestBackInOrderWithAPendingCall"]
NOTE = "make test's fast subset runs the C++ check only (the fake host's stop_drain stops the drain after its second cleanup); make mutate also runs the pytest check, where test_sigint_during_a_slow_drain_arrives_at_once_and_the_pending_call_finishes_it fails on it."
