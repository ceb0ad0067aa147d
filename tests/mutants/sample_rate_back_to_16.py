# SPDX-License-Identifier: Apache-2.0
"""The reference's re-arm look samples one fast-path hit in 16 again (rearm_sample_log2 = 4), the rate before the one-producer decision."""

FILE = "include/deferred_cleanup/policy.hpp"
FIND = """\
  static constexpr unsigned rearm_sample_log2 = 6;
"""
REPLACE = """\
  static constexpr unsigned rearm_sample_log2 = 4;  // MUTANT: the old rate, one hit in 16
"""
PROPERTY = (
    "a producer of the reference looks at the claim's age on about one fast-path hit in 64 "
    "(ReferencePolicy::rearm_sample_log2), not more often: the look is the cost that kept one "
    "producer below the bare Treiber push"
)
KILLED_BY = ["cpp"]
KILLING_TESTS = ["SampleStaleCheck.SamplesOneFastPathHitIn64"]
