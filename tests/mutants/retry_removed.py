# SPDX-License-Identifier: Apache-2.0
"""An entry point that cannot drain no longer retries scheduling."""

FILE = "include/deferred_cleanup/drain.hpp"
FIND = "    retry_schedule(q);\n    return EntryAction::rescheduled;\n"
REPLACE = "    return EntryAction::rescheduled;  // MUTANT: no retry\n"
PROPERTY = "after a refused call, an entry point off the main thread (or of the seed) makes the pending call again"
KILLED_BY = ["cpp-asan"]
KILLING_TESTS = ["Core/reference.EntryPointOffTheMainThreadOnlyRetries"]
NOTE = ""
