// SPDX-License-Identifier: Apache-2.0
// shutdown.hpp: stop calling into CPython before CPython goes away.
//
// The hazard.  Py_AddPendingCall after Py_FinalizeEx crashes 3.10-3.12 (the
// interpreter state it dereferences is freed) and is a silent no-op on 3.13+
// (measured by the probe: field `after_finalize.outcome`).  Py_AtExit
// callbacks run after the interpreter is gone (Python/pylifecycle.c,
// call_ll_exitfuncs, v3.12.0; probe field `py_atexit.initialized`), so a flag
// set there closes the door too late: a driver thread that checked the flag
// just before can still call Py_AddPendingCall afterwards.  That is the
// design as the PR #2371 text states it (SeedPolicy).  cuda-core 1.2.0 as
// shipped (CudaCore12Policy) checks `!Py_IsInitialized() || finalizing` in
// schedule() instead, which narrows the window to the instructions between
// that check and the call, but does not close it.
//
// The reference closes it with the in-flight gate, and closes it while the
// interpreter is still fully alive (cuda-core-1.2-fixed, the wheel's minimal
// fix, does the same with the same gate and steps 0-3 below): during the
// Python `atexit` phase, which
// CPython runs before it sets its finalizing flag (Python/pylifecycle.c,
// Py_FinalizeEx, v3.12.0: _PyAtExit_Call comes before
// _PyRuntimeState_SetFinalizing).  The CPython host (reference/src/exit.cpp)
// runs the sequence below from an exit hook, and keeps draining on the main
// thread until finalization begins:
//
//   * where it can (3.10-3.13), the hook runs after every other atexit
//     handler, whatever their registration order: it is registered from a
//     threading-module exit callback (threading._register_atexit: those run in
//     threading._shutdown, before the atexit handlers), so it is the last
//     registered and runs first, and it runs every other handler itself
//     (atexit._run_exitfuncs(), which empties the list) before its sequence;
//     an exception that ends threading._shutdown before that callback (a
//     Ctrl-C there) would skip it, so a plain handler registered at import
//     runs the sequence then, as on 3.14;
//   * from CPython 3.14 the atexit module calls its handlers from a copy of
//     its list, so a handler cannot run the others itself (each would run
//     twice; measured by test_atexit_list_semantics): the hook is registered
//     at import, and handlers registered before the import run after it;
//   * so, on every version, a graph destroyed on the main thread after the
//     sequence (by such a handler) and before CPython sets its finalizing
//     flag gets the sequence's step 0 again: the destroy waits, bounded by
//     the exit wait, for the destructors it made due, and drains.  The gate
//     is already closed, so nothing calls Py_AddPendingCall any more; the
//     drains run on the main thread, which holds the GIL.
//
// tests/test_exit.py checks, on every interpreter of the matrix, that the
// payloads of graphs destroyed by handlers registered before the import,
// after it and through weakref.finalize are all released on the main thread.
//
// The reference sequence, on the main thread, interpreter alive:
//
//   0. await           (host) drain while destructors of graphs destroyed
//                      before exit are still due, bounded by the exit wait
//                      (default 5 s, deferred_cleanup.configure(exit_wait_s));
//   1. close()         accepting_ = false: no producer enters the gate now;
//   2. wait the gate   spin (yield, then short sleeps) until in_flight() == 0,
//                      bounded by `gate_bound`: a producer already between
//                      its check and Py_AddPendingCall finishes the call while
//                      the interpreter is fully alive;
//   3. final drain     drain_all() on the main thread;
//   4. mark_host_dead() (host) when the host first sees CPython's finalizing
//                      flag (a pending call, an entry point), at the latest
//                      in the Py_AtExit backstop: pending calls and entry
//                      points become no-ops.  Between 3 and 4 only the main
//                      thread drains (entry points, the late step 0 above).
//
// Work that arrives after step 1 is pushed (late callbacks always enqueue
// safely: the queue is never freed) and gets no pending call; a main-thread
// drain before step 4 still cleans it, and after step 4 nothing does: its
// payload is leaked on purpose, because releasing it would touch Python
// objects of a dying interpreter.  The backstop, a Py_AtExit callback of the host in every
// variant, counts what is still queued as leaked_at_shutdown without taking
// or touching anything; in the seed it is also the PR text's only shutdown
// step (stop accepting); for cuda-core-1.2 it changes nothing.
//
// The gate wait is bounded (default 5 s) so that a wedged driver thread cannot
// hang interpreter exit.  The only code inside the gate is Py_AddPendingCall,
// which holds CPython's pending-call lock for a few instructions, so the bound
// is not reached in practice; if it is, stats.gate_timeouts counts it and the
// hazard remains for that one producer.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

#include "deferred_cleanup/drain.hpp"
#include "deferred_cleanup/queue.hpp"

namespace deferred_cleanup {

/// Default bound of the gate wait in shutdown_at_exit().
///
/// Thread: any (a constant).  Memory ordering: n/a.  Errors: n/a.
/// Source: this project (shutdown.hpp's essay: not reached in practice).
DEFERRED_CLEANUP_LOCAL inline constexpr std::chrono::milliseconds kDefaultGateBound{5000};

/// What the reference shutdown sequence did.
///
/// Thread: returned to the shutdown path on the main thread.
/// Memory ordering: n/a (a value).  Errors: n/a.
/// Source: this project.
struct ShutdownOutcome {
  bool gate_clear = false;          ///< in_flight() reached 0 within the bound
  std::uint64_t waited_us = 0;      ///< time spent waiting for the gate
  std::uint64_t final_drained = 0;  ///< cleanups run by the final drain
};

// [doc:gate-wait]
/// Wait until no producer is inside the gate, or the bound expires.
///
/// Thread: the shutdown path (main thread).  Blocks up to `bound`: first
/// std::this_thread::yield() for a short while, then sleeps of 50 us.
/// Memory ordering: in_flight() is seq_cst; a zero read synchronizes with the
/// last gate_leave() (release), so every host call made inside the gate
/// happens-before the return.
/// Errors: none; returns false when the bound expired.
/// Source: this project.
/// @param q the queue, already closed
/// @param bound the longest wait
/// @param waited_us receives the time waited, in microseconds
/// @return true when the gate is empty
template <class P>
bool wait_gate(const BasicQueue<P>& q, std::chrono::nanoseconds bound,
               std::uint64_t& waited_us) noexcept {
  const auto start = std::chrono::steady_clock::now();
  int spins = 0;
  bool clear = true;
  while (q.in_flight() != 0) {
    const auto elapsed = std::chrono::steady_clock::now() - start;
    if (elapsed >= bound) {
      clear = false;
      break;
    }
    if (++spins < 1000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  waited_us = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(waited).count());
  return clear;
}
// [end-doc:gate-wait]

// [doc:shutdown-sequence]
/// Steps 1-3 of the reference shutdown: close, wait out the gate, final
/// drain.  Step 4 (mark_host_dead) is the host's, once CPython finalizes.
/// cuda-core-1.2-fixed runs the same steps 1-3 (its gate and exit fixes;
/// policy.hpp) and has no step 4: its drain's shipped finalizing test leaks.
///
/// Thread: the main thread, from the host's exit hook while the interpreter
/// is fully alive (the CPython host holds the GIL throughout; the producers
/// it waits for never need it).  Blocks up to `gate_bound` plus the final
/// drain's cleanups.
/// Memory ordering: close() then in_flight() are seq_cst: the shutdown half
/// of the gate's store-buffering pair (queue.hpp).  mark_host_dead() is a
/// release store read by host_alive().
/// Errors: none; an expired bound is counted in stats.gate_timeouts and
/// reported in the outcome.  Idempotent: a second call finds nothing to do.
/// Source: this project; Python atexit order: Python/pylifecycle.c
/// Py_FinalizeEx (v3.12.0) calls the atexit module before setting the
/// runtime's finalizing state.
/// @param q the published queue
/// @param gate_bound longest wait for producers inside the gate
/// @return what the sequence did
template <class P>
ShutdownOutcome shutdown_at_exit(BasicQueue<P>& q,
                                 std::chrono::nanoseconds gate_bound = kDefaultGateBound) noexcept {
  static_assert(exit_release_of<P>(), "only the reference and cuda-core-1.2-fixed exit so");
  ShutdownOutcome out;
  q.close();                                                 // 1. no new host calls
  out.gate_clear = wait_gate(q, gate_bound, out.waited_us);  // 2. wait those in flight
  if (!out.gate_clear) {
    q.stats.gate_timeouts.fetch_add(1, std::memory_order_relaxed);  // statistics only
  }
  out.final_drained = drain_all(q);  // 3. interpreter still alive
  return out;                        // 4. the host's: mark_host_dead() once CPython is finalizing
}
// [end-doc:shutdown-sequence]

// [doc:backstop]
/// The backstop, run from the host's Py_AtExit callback in every variant:
/// the seed's own shutdown step (stop accepting, as the PR #2371 text
/// says), then count, without taking or touching anything, the items still
/// queued as leaked.
///
/// Thread: the thread running Py_FinalizeEx (the main thread), after the
/// interpreter is gone: it must not use any Python API.  Never blocks.
/// Memory ordering: close() is P::gate_close; count_queued() loads head_ with
/// acquire so the items' `next` links are visible while counting.
/// Errors: none.
/// Source: Py_AtExit, Python/pylifecycle.c call_ll_exitfuncs (v3.12.0);
/// cuda-python PR #2371 (the seed stops its queue at exit and leaks the rest).
/// @param q the published queue
/// @return items counted as leaked by this call
template <class P>
std::uint64_t backstop_at_exit(BasicQueue<P>& q) noexcept {
  if constexpr (P::close_at_py_atexit) {
    q.close();
  }
  const std::uint64_t leaked = q.count_queued();  // leaked on purpose: never touched
  q.stats.leaked_at_shutdown.store(leaked, std::memory_order_relaxed);  // statistics only
  return leaked;
}
// [end-doc:backstop]

}  // namespace deferred_cleanup
