# SPDX-License-Identifier: Apache-2.0
"""A running call reads the superseded record before it moves the claim (the old order)."""

FILE = "include/deferred_cleanup/rearm_state.hpp"
FIND = """\
    const bool claims = move_claim_seq(seq, 0);
    std::uint64_t s = superseded_seq_.load(std::memory_order_relaxed);  // heuristic
    if (s != 0 && seq >= s) {
      // FIFO: the superseded call is gone; clear only that number.
      superseded_seq_.compare_exchange_strong(s, 0, std::memory_order_relaxed);
    }
"""
REPLACE = """\
    std::uint64_t s = superseded_seq_.load(std::memory_order_relaxed);  // heuristic
    if (s != 0 && seq >= s) {
      // FIFO: the superseded call is gone; clear only that number.
      superseded_seq_.compare_exchange_strong(s, 0, std::memory_order_relaxed);
    }
    const bool claims = move_claim_seq(seq, 0);  // MUTANT: after the record
"""
PROPERTY = "with one lost call, the pending-call path recovers by re-arming: a re-arm can never leave the running call recorded as superseded"
NOTE = "the interleaving is a few instructions wide; spin's trail (tests/model) is the proof, and the order check binds the code to it"
KILLED_BY = ["text:tests/test_model_code.py"]
KILLING_TESTS = ["test_call_ran_moves_the_claim_before_it_reads_the_records"]
