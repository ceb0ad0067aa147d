# SPDX-License-Identifier: Apache-2.0
"""Graph.attach() accepts new payloads after the exit sequence."""

FILE = "reference/src/api_bindings.cpp"
FIND = """\
  if (shut_down())
    throw ShutdownError(
"""
REPLACE = """\
  if (false)  // MUTANT: attach() accepted after shutdown
    throw ShutdownError(
"""
PROPERTY = (
    "after the exit sequence Graph.attach() raises ShutdownError and does not retain the object"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_shutdown.py -k after_shutdown"]
KILLING_TESTS = ["test_api_after_shutdown"]
