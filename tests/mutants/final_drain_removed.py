# SPDX-License-Identifier: Apache-2.0
"""The exit sequence skips its final drain."""

FILE = "include/deferred_cleanup/shutdown.hpp"
FIND = "out.final_drained = drain_all(q);"
REPLACE = "out.final_drained = 0;  // MUTANT: no final drain"
PROPERTY = "items queued before exit are cleaned by the final drain while the interpreter is alive"
KILLED_BY = ["cpp-asan"]
KILLING_TESTS = ["Shutdown.AfterCloseCallbacksOnlyEnqueueAndAreLeaked"]
NOTE = ""
