# SPDX-License-Identifier: Apache-2.0
"""Every producer wins the claim, so each callback adds its own pending call."""

FILE = "include/deferred_cleanup/queue.hpp"
FIND = """\
      return !scheduled_.exchange(true, P::claim);
"""
REPLACE = """\
      return (scheduled_.exchange(true, P::claim), true);  // MUTANT: every claimant wins
"""
PROPERTY = "one claim, one winner: a claimant that finds the claim taken adds no pending call (one call of the queue outstanding)"
KILLED_BY = ["cpp"]
KILLING_TESTS = ["Core/reference.ASecondClaimantLosesTheClaim"]
NOTE = "the fast path skips claim() when it reads the flag set, so a sequential burst never meets a taken claim; the pytest burst test passed on it (only racing producers, or a direct schedule(), do)"
