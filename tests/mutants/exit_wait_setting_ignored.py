# SPDX-License-Identifier: Apache-2.0
"""The exit sequence waits its default 5 s whatever configure(exit_wait_s=...) said."""

FILE = "reference/src/exit.cpp"
FIND = """\
  const std::int64_t bound = q.settings.exit_wait_ns.load(std::memory_order_relaxed);  // a setting
"""
REPLACE = """\
  const std::int64_t bound = 5'000'000'000;  // MUTANT: configure(exit_wait_s) ignored
"""
PROPERTY = (
    "configure(exit_wait_s=X) bounds the exit sequence's wait for due destructors to X seconds"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_exit.py -k honoured"]
KILLING_TESTS = ["test_exit_wait_s_is_honoured_in_seconds"]
