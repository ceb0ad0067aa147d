# SPDX-License-Identifier: Apache-2.0
"""The claimant starts the stale clock at the add (a clock read on every claim) instead of marking the claim untimed."""

FILE = "include/deferred_cleanup/rearm_state.hpp"
FIND = """\
    if (host.now_ns != nullptr) arm_claim_time(seq, kClaimUntimed);
"""
REPLACE = """\
    if (host.now_ns != nullptr) arm_claim_time(seq, claim_stamp(host.now_ns()));  // MUTANT: timed at the add
"""
PROPERTY = (
    "the claimant reads no clock: a claim is stale once it has been seen outstanding for the stale bound "
    "(the first look starts its clock), not from the add"
)
KILLED_BY = ["cpp"]
KILLING_TESTS = ["Rearm.StaleClockStartsAtTheFirstLookNotAtTheAdd"]
