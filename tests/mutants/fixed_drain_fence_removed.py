# SPDX-License-Identifier: Apache-2.0
"""cuda-core-1.2-fixed without the drain's fence (one of the two)."""

FILE = "include/deferred_cleanup/queue.hpp"
FIND = """\
      // CudaCore12FixedPolicy: orders the clear before this load (fixed.fence).
      std::atomic_thread_fence(std::memory_order_seq_cst);
"""
REPLACE = """\
      // CudaCore12FixedPolicy: orders the clear before this load (fixed.fence).
      // MUTANT: the drain's fence removed
"""
PROPERTY = "cuda-core-1.2-fixed has one sequentially consistent fence on each side of the store-buffering pair"
KILLED_BY = ["litmus"]
KILLING_TESTS = ["test_fixed_fences_are_in_the_headers_and_the_litmus_file"]
NOTE = "herd7 allows the lost wakeup with either fence removed (test_fixed_needs_both_fences); tests/test_lost_wakeup.py shows it on this CPU, too slow for the mutant matrix"
