# SPDX-License-Identifier: Apache-2.0
"""The direct drain at a main-thread entry point clears the claim."""

FILE = "include/deferred_cleanup/drain.hpp"
FIND = """\
        drain_all(q);  // gh-95820: do not wait for a pending call that may starve
"""
REPLACE = """\
        drain_all(q);  // gh-95820: do not wait for a pending call that may starve
        q.clear();     // MUTANT: the entry point clears the claim
"""
PROPERTY = "an entry point's direct drain never clears scheduled_: only the claim's own call does, so a burst keeps one pending call"
KILLED_BY = ["cpp"]
KILLING_TESTS = ["Reference.EntryPointDrainKeepsTheClaim"]
