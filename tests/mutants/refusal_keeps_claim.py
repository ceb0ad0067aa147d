# SPDX-License-Identifier: Apache-2.0
"""After the host refuses the pending call, the claim is not given back."""

FILE = "include/deferred_cleanup/scheduling.hpp"
FIND = "      q.unclaim();\n      result = ScheduleResult::refused;\n"
REPLACE = (
    "      // MUTANT: the claim is kept after a refusal\n      result = ScheduleResult::refused;\n"
)
PROPERTY = "a refused Py_AddPendingCall (-1) releases scheduled_, so the next enqueue or entry point retries"
KILLED_BY = ["cpp-asan"]
KILLING_TESTS = ["Core/reference.RefusalGivesTheClaimBackAndKeepsTheItem"]
NOTE = ""
