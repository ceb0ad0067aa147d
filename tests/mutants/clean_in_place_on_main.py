# SPDX-License-Identifier: Apache-2.0
"""A destructor callback that runs on the main thread cleans its payload at
once, inside the driver call, instead of pushing and scheduling."""

FILE = "include/deferred_cleanup/callback.hpp"
FIND = "  q.push(item);  // step 1: publish the item (wakeup.push)\n"
REPLACE = (
    "  if (q.host().is_main_thread()) { cleanup_directly(q, item); "
    "return ScheduleResult::already_scheduled; }  // MUTANT\n"
    "  q.push(item);  // step 1: publish the item (wakeup.push)\n"
)
PROPERTY = "a destructor callback run inside destroy() on the main thread still defers the cleanup: the payload is released later, in a drain, never inside the driver call"
KILLED_BY = ["cpp", "pytest:cp312-pyenv:tests/test_callback.py -k inside_destroy"]
KILLING_TESTS = ["Core/reference.ManyCallbacksMakeOnePendingCall"]
NOTE = "make test's fast subset runs the C++ check only (the fake host's main thread then cleans in place and adds no pending call); make mutate also runs test_callback.py's test_a_destructor_run_inside_destroy_on_the_main_thread_still_defers_the_cleanup, which fails on it. The one-line shortcut a reader might take: on the main thread the GIL is already held, so why not clean now? Because the driver call is still on the stack (its locks held) and the finalizer would run inside it."
