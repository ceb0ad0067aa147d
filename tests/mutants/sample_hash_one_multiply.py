# SPDX-License-Identifier: Apache-2.0
"""The stale-check sample is a single multiplicative hash of the item address again (no xor-shift, no second multiply)."""

FILE = "include/deferred_cleanup/callback.hpp"
FIND = """\
  x ^= x >> 29;  // fold the high bits, which depend on every address bit, into the low ones
  x *= kGolden;
"""
REPLACE = """\
  // MUTANT: one multiply only; bursts at a regular stride can hold no sampled item
"""
PROPERTY = (
    "a producer looks at the claim's age on about one fast-path hit in 2^rearm_sample_log2, also "
    "for items allocated at a regular stride (a burst of 400 holds no sampled item about as rarely "
    "as random addresses)"
)
KILLED_BY = ["cpp"]
KILLING_TESTS = ["SampleStaleCheck.BurstsAtAnyStrideHoldASampledItem"]
