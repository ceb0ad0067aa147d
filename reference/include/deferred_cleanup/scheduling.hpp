// scheduling.hpp: make sure exactly one pending call is outstanding.
//
// CPython's pending-call ring is small: a foreign thread can hold 31 calls on
// 3.10-3.12 (32 slots, one kept free) and 32 on 3.13+; when it is full,
// Py_AddPendingCall returns -1, evicts nothing and sets no exception
// (Python/ceval.c v3.10.0 and v3.11.0, Python/ceval_gil.c v3.12.0 and
// v3.13.0; measured by the probe, see
// cpython_facts.py).  A destructor callback therefore must not make one
// pending call per item.  The queue's `scheduled_` flag goes false -> true in
// one atomic exchange; only the producer that flips it calls the host, so any
// number of callbacks cause at most one outstanding pending call.
//
// When the host refuses (-1), the claimant puts `scheduled_` back to false.
// Its item stays queued.  The next enqueue or a later entry point retries: a
// retry only schedules, it never pushes the item again.
//
// Before calling the host the producer passes the in-flight gate (queue.hpp):
// once shutdown has closed the gate nobody calls into CPython, and shutdown
// waits for those already inside.
//
// The host.  The core never includes Python.h.  Everything it needs from the
// embedding runtime is in `Host`, a struct of plain function pointers:
//
//   add_pending_call(fn, arg)   Py_AddPendingCall semantics: 0 when `fn(arg)`
//                               will run later on the main thread, -1 when
//                               refused (nothing queued, nothing raised).
//                               Callable from a thread with no thread state.
//   is_main_thread()            whether the calling thread is the one that
//                               runs drains (CPython's main thread).
//   in_gate(queue)              optional test hook, called between the gate
//                               check and add_pending_call; may sleep.  Null
//                               in production.
//
// The CPython host lives in reference/src/; GoogleTest supplies fakes.
#pragma once

#include <cstdint>

#include "deferred_cleanup/queue.hpp"

namespace deferred_cleanup {

/// Signature of a pending-call function: CPython's `int (*)(void*)`.
///
/// Thread: such a function runs on the main thread, called by the host.
/// Memory ordering: n/a (a type).  Errors: returns 0; CPython treats -1 as
/// "exception set".
/// Source: Py_AddPendingCall, Include/ceval.h (v3.10.0 ... v3.14.0).
using PendingCallFn = int (*)(void* arg);

/// What the core needs from the embedding runtime.
///
/// Thread: add_pending_call and in_gate are called from producer threads that
/// hold no Python thread state (and from the main thread on retries);
/// is_main_thread from any thread.  add_pending_call may block briefly on the
/// host's own lock (CPython's pending-call mutex) and must not call back into
/// the core.
/// Memory ordering: the host's own; the core relies only on "fn(arg) runs on
/// the main thread after add_pending_call returned 0".
/// Errors: add_pending_call returns -1 when it refuses; nothing throws.
/// Source: Py_AddPendingCall, Python/ceval_gil.c (v3.10.0 ... v3.13.0),
/// documented in Doc/c-api/init.rst.
struct Host {
  /// Schedule fn(arg) on the main thread (Py_AddPendingCall).  Thread: any,
  /// no thread state needed.  Returns 0 on success, -1 when refused.
  int (*add_pending_call)(PendingCallFn fn, void* arg);
  /// Whether the caller is the thread that runs drains.  Thread: any.
  bool (*is_main_thread)();
  /// Optional test hook inside the gate window (may be nullptr).  Thread:
  /// the producer; may sleep (tests hold a producer here on purpose).
  void (*in_gate)(const Queue& queue);
};

/// Outcome of one scheduling attempt.
///
/// Thread: returned to the producer that called try_schedule().
/// Memory ordering: n/a (a value).  Errors: n/a.
/// Source: cuda-python PR #2371 (refusal handling); issue 3 Part 1.4.
enum class ScheduleResult : std::uint8_t {
  scheduled,          ///< this call made the one outstanding pending call
  already_scheduled,  ///< a pending call was already outstanding
  refused,            ///< the host returned -1; scheduled_ is false again
  not_accepting,      ///< shutdown closed the gate; the host was not called
};

// [doc:schedule]
/// Make sure a pending call that will drain `queue` is outstanding.
///
/// Thread: any.  Called by destructor callbacks on driver threads (no thread
/// state) and by entry points that retry.  It never allocates and never
/// waits, except inside the host's add_pending_call (CPython takes its
/// pending-call lock) and inside the optional test hook.
/// Memory ordering: the gate (gate_enter, seq_cst in the reference) comes
/// first, then claim_schedule() (seq_cst exchange in the reference), which
/// with the caller's earlier push forms the producer half of the
/// store-buffering pair; the refusal path's unclaim_schedule() is release.
/// Errors: none thrown.  A refusal is counted in stats.schedule_failures and
/// reported as ScheduleResult::refused; the item stays queued for a retry.
/// Source: cuda-python PR #2371 (one outstanding pending call, retry on -1);
/// Py_AddPendingCall, Python/ceval_gil.c v3.12.0.
/// @param queue the queue to drain
/// @param fn the pending-call function (drain.hpp's pending_call)
/// @return what happened
inline ScheduleResult try_schedule(Queue& queue, PendingCallFn fn) noexcept {
  if (!queue.gate_enter()) {
    return ScheduleResult::not_accepting;
  }
  if (!queue.claim_schedule()) {
    queue.gate_leave();
    return ScheduleResult::already_scheduled;
  }
  const Host& host = queue.host();
  if (host.in_gate != nullptr) {
    host.in_gate(queue);  // test hook: hold this producer inside the gate window
  }
  queue.stats.schedule_attempts.fetch_add(1, std::memory_order_relaxed);  // statistics only
  if (!queue.host_alive()) {  // acquire; pairs with mark_host_dead()'s release
    // Diagnostic only: a host call after teardown.  Unreachable in the
    // reference unless the gate wait timed out (our gate_leave() is read by
    // shutdown's wait before it marks the host dead); the seed reaches it.
    queue.stats.host_calls_after_teardown.fetch_add(1, std::memory_order_relaxed);  // statistics only
  }
  const int rc = host.add_pending_call(fn, &queue);
  ScheduleResult result = ScheduleResult::scheduled;
  if (rc != 0) {
    // Refused: nothing was queued in CPython; give the claim back so the next
    // enqueue or entry point retries.  Our item is still in head_.
    queue.unclaim_schedule();
    queue.stats.schedule_failures.fetch_add(1, std::memory_order_relaxed);  // statistics only
    result = ScheduleResult::refused;
  } else {
    queue.stats.pending_calls.fetch_add(1, std::memory_order_relaxed);  // statistics only
  }
  queue.gate_leave();
  return result;
}
// [end-doc:schedule]

/// Retry scheduling if work is queued and no pending call is outstanding.
///
/// Thread: any (entry points off the main thread can only do this; the seed
/// variant does it on the main thread too).  Never blocks beyond
/// try_schedule().
/// Memory ordering: the emptiness test is a relaxed snapshot, used only to
/// skip a needless attempt: if an item is pushed just after it, its own
/// producer schedules.
/// Errors: none thrown.
/// Source: issue 3 Part 1.4 ("a later safe entry point retries").
/// @param queue the queue
/// @param fn the pending-call function
/// @return the scheduling result, or already_scheduled when nothing was tried
inline ScheduleResult retry_schedule(Queue& queue, PendingCallFn fn) noexcept {
  if (queue.empty_snapshot() || queue.scheduled_snapshot()) {
    return ScheduleResult::already_scheduled;
  }
  queue.stats.retries.fetch_add(1, std::memory_order_relaxed);  // statistics only
  return try_schedule(queue, fn);
}

}  // namespace deferred_cleanup
