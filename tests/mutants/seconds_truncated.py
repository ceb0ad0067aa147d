# SPDX-License-Identifier: Apache-2.0
"""A bound in seconds is kept as the truncated, not the nearest, whole nanosecond."""

FILE = "reference/src/host.cpp"
FIND = """\
  return std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(seconds * 1e9)));
"""
REPLACE = """\
  return std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9));  // MUTANT: truncated
"""
PROPERTY = (
    "configure() keeps a bound given in seconds as the one given: settings() gives a "
    "millisecond value back equal (2.026 s, not 2.025999999 s)"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_arg_types.py -k millisecond"]
KILLING_TESTS = ["test_configure_keeps_every_millisecond_value_exactly"]
