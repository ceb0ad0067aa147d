# SPDX-License-Identifier: Apache-2.0
"""The C-API host's exit sequence does not wait for the user's outstanding work."""

FILE = "src/cpython/exit.cpp"
FIND = """\
  return n != 0;
}
"""
REPLACE = """\
  return n != 0 && false;  // MUTANT: step 0 waits for nothing
}
"""
PROPERTY = "Step 0 of the exit sequence waits, draining, while outstanding(ctx) returns non-zero"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_examples.py"]
KILLING_TESTS = ["test_example_builds_against_the_installed_wheel_and_its_tests_pass"]
