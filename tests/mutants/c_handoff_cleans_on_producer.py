# SPDX-License-Identifier: Apache-2.0
"""dc_hand_off() runs the cleanup on the calling thread instead of queueing it."""

FILE = "src/cpython/host.cpp"
FIND = """\
  on_user_object_destroyed(*g.queue, &item->core);
"""
REPLACE = """\
  run_cleanup(&item->core);  // MUTANT: cleaned where it was handed off
"""
PROPERTY = "an item handed off from any thread is cleaned on the main thread, GIL held"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_examples.py"]
KILLING_TESTS = ["test_example_builds_against_the_installed_wheel_and_its_tests_pass"]
