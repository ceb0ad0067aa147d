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
KILLED_BY = ["pytest:cp312-pyenv:tests/test_interrupt.py -k stops_the_drain"]
KILLING_TESTS = ["test_ctrl_c_in_a_finalizer_stops_the_drain_and_leaves_the_rest_queued"]
