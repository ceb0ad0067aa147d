# SPDX-License-Identifier: Apache-2.0
"""drain_now() drains on any thread instead of refusing off the main thread."""

FILE = "include/deferred_cleanup/drain.hpp"
FIND = """\
  if (!q.host().is_main_thread()) {
    return {DrainNowStatus::not_main_thread, 0};
"""
REPLACE = """\
  if (false) {  // MUTANT: drain_now() runs cleanups on any thread
    return {DrainNowStatus::not_main_thread, 0};
"""
PROPERTY = "drain_now() raises NotMainThreadError off the main thread and loses nothing: cleanups run on the main thread only"
KILLED_BY = ["cpp", "pytest:cp312-pyenv:tests/test_drain.py -k off_main_thread"]
KILLING_TESTS = ["DrainNow.OffTheMainThreadRefusesAndLosesNothing"]
NOTE = "make test's fast subset runs the C++ check only (there drain_now() runs the cleanup on the other thread); make mutate also runs the pytest check, where test_drain_now_off_main_thread_raises_and_loses_nothing fails on it."
