# SPDX-License-Identifier: Apache-2.0
"""The exit sequence drains before it waits out the gate, not after."""

FILE = "include/deferred_cleanup/shutdown.hpp"
FIND = """\
  out.gate_clear = wait_gate(q, gate_bound, out.waited_us);  // 2. wait those in flight
  if (!out.gate_clear) {
    q.stats.gate_timeouts.fetch_add(1, std::memory_order_relaxed);  // statistics only
  }
  out.final_drained = drain_all(q);  // 3. interpreter still alive
"""
REPLACE = """\
  out.final_drained = drain_all(q);  // MUTANT: the final drain before the gate wait
  out.gate_clear = wait_gate(q, gate_bound, out.waited_us);  // 2. wait those in flight
  if (!out.gate_clear) {
    q.stats.gate_timeouts.fetch_add(1, std::memory_order_relaxed);  // statistics only
  }
"""
PROPERTY = "the final drain runs after the gate wait, so it releases what producers push while the exit sequence waits out the gate"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_shutdown.py -k final_drain_comes_after_the_gate_wait"]
KILLING_TESTS = ["test_reference_final_drain_comes_after_the_gate_wait"]
NOTE = "the held producer releases another driver's destructor 50 ms after the close; that payload is pushed during the gate wait"
