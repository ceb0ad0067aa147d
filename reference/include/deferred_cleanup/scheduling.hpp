// scheduling.hpp: make sure one pending call is outstanding.
//
// CPython's pending-call ring is small: a foreign thread can hold 31 calls on
// 3.10-3.12 (32 slots, one kept free) and 32 on 3.13+; when it is full,
// Py_AddPendingCall returns -1, evicts nothing and sets no exception
// (Python/ceval.c v3.10.0 and v3.11.0, Python/ceval_gil.c v3.12.0 and
// v3.13.0; measured by the probe: cpython_facts.py, field `capacity`).  A
// destructor callback therefore must not make one pending call per item.  The
// queue's `scheduled_` flag goes false -> true in one atomic RMW; only the
// producer that flips it calls the host, so any number of callbacks cause one
// outstanding pending call.
//
// When the host refuses (-1), the claimant puts `scheduled_` back to false.
// Its item stays queued.  The next enqueue or a later entry point retries: a
// retry only schedules, it never pushes the item again.
//
// Re-arming (reference).  A pending call that was accepted may still never
// run: on 3.10 and 3.11 a call added from a thread with no thread state while
// a subinterpreter holds the GIL goes to that interpreter and is lost (the
// probe's field `subinterp.runner`; Python/ceval.c v3.11.0, bpo-10915).  Then
// `scheduled_` would stay true for good and no producer would ever schedule
// again.  So a claim older than the stale bound (default 1 s,
// deferred_cleanup.configure(stale_claim_s=...)) whose call has not run may
// be re-armed once: one producer or entry point adds a second pending call
// while the first may still be outstanding.  `calls_outstanding_` counts
// calls added and not yet run, and the second call is taken with a CAS
// 1 -> 2, so at most two are ever outstanding.  A producer looks at the
// claim's age on about one fast-path hit in 16, chosen by a hash of the item
// address (a clock read on every hit would double the fast path's cost);
// main-thread entry points look every time.
//
// Before calling the host a reference producer passes the in-flight gate
// (queue.hpp): once shutdown has closed the gate nobody calls into CPython,
// and shutdown waits for those already inside.  The comparison variants have
// no gate: cuda-core 1.2.0 checks `!Py_IsInitialized() || finalizing` and the
// PR #2371 text relies on a Py_AtExit callback; either leaves a window
// between the check and Py_AddPendingCall (docs/design/shutdown).
//
// The host.  The core never includes Python.h.  Everything it needs from the
// embedding runtime is in `Host`, a struct of plain function pointers.  The
// CPython host lives in reference/src/host.cpp; tests/cpp has a fake.
#pragma once

#include <cstdint>

#include "deferred_cleanup/queue.hpp"

namespace deferred_cleanup {

/// Signature of a pending-call function: CPython's `int (*)(void*)`.
///
/// Thread: such a function runs on the main thread, called by the host.
/// Memory ordering: n/a (a type).  Errors: returns 0, or -1 with an
/// exception set (CPython then raises it in the interrupted code).
/// Source: Py_AddPendingCall, Include/ceval.h (v3.10.0 ... v3.14.0).
using PendingCallFn = int (*)(void* arg);

// [doc:host]
/// What the core needs from the embedding runtime.
///
/// Thread: add_pending_call, in_gate, now_ns and finalizing are called from
/// producer threads that hold no Python thread state (and from the main
/// thread); is_main_thread and after_drain from the main thread.
/// add_pending_call may block briefly on the host's own lock (CPython's
/// pending-call mutex) and must not call back into the core.
/// Memory ordering: the host's own; the core relies only on "fn(arg) runs on
/// the main thread after add_pending_call returned 0, unless the host loses
/// it" (the re-arm rule covers a lost call).
/// Errors: add_pending_call returns -1 when it refuses; nothing throws.
/// Source: Py_AddPendingCall, Python/ceval_gil.c (v3.12.0, v3.13.0),
/// documented in Doc/c-api/init.rst.
struct Host {
  /// Schedule fn(arg) on the main thread (Py_AddPendingCall).  Thread: any,
  /// no thread state needed.  Returns 0 on success, -1 when refused.
  int (*add_pending_call)(PendingCallFn fn, void* arg) = nullptr;
  /// Whether the caller is the thread that runs drains.  Thread: any.
  bool (*is_main_thread)() = nullptr;
  /// Optional test hook between the last check and add_pending_call (may be
  /// nullptr).  Thread: the producer; may sleep.  Argument: the queue.
  void (*in_gate)(const void* queue) = nullptr;
  /// A monotonic clock in nanoseconds, for the re-arm rule (may be nullptr:
  /// then no claim ever looks stale).  Thread: any; must not block.
  std::int64_t (*now_ns)() = nullptr;
  /// Whether the host interpreter is finalizing or not initialized (may be
  /// nullptr: never).  Only the comparison variants ask.  Thread: any.
  bool (*finalizing)() = nullptr;
  /// Optional: called by pending_call after a drain; returns what the
  /// pending call returns (0, or -1 with an exception set to deliver a
  /// KeyboardInterrupt or SystemExit that a cleanup raised).  Thread: main.
  int (*after_drain)() = nullptr;
};
// [end-doc:host]

/// Outcome of one scheduling attempt.
///
/// Thread: returned to the producer that called schedule().
/// Memory ordering: n/a (a value).  Errors: n/a.
/// Source: cuda-python PR #2371 (refusal handling).
enum class ScheduleResult : std::uint8_t {
  scheduled,          ///< this call made the one outstanding pending call
  already_scheduled,  ///< a pending call was already outstanding
  refused,            ///< the host returned -1; scheduled_ is false again
  not_accepting,      ///< shutdown closed the door; the host was not called
  empty,              ///< comparison variants: head_ read empty, nothing to do
  rearmed,            ///< a stale claim was re-armed: a second call was added
};

template <class P>
int pending_call(void* arg) noexcept;  // drain.hpp

/// Call the host, counting the outcome.  Internal to schedule() and rearm.
///
/// Thread: the producer that holds the claim (or the second-call right).
/// Memory ordering: none of its own.
/// Errors: none thrown; returns the host's result.
/// Source: Py_AddPendingCall, Python/ceval_gil.c v3.12.0.
/// @param q the queue
/// @param counted true when the caller already counted the call in
///        calls_outstanding_ (the re-arm's CAS 1 -> 2)
/// @return 0 when accepted, -1 when refused
template <class P>
int add_call(BasicQueue<P>& q, bool counted = false) noexcept {
  const Host& host = q.host();
  if (host.in_gate != nullptr) {
    host.in_gate(&q);  // test hook: hold this producer inside the window
  }
  q.stats.schedule_attempts.fetch_add(1, std::memory_order_relaxed);  // statistics only
  if constexpr (P::rearm) {
    if (!counted) {
      q.call_added();  // before the call: on 3.13+ it may run before the call returns
    }
  }
  const int rc = host.add_pending_call(&pending_call<P>, &q);
  if (rc != 0) {
    if constexpr (P::rearm) {
      q.call_gone();
    }
    q.stats.schedule_failures.fetch_add(1, std::memory_order_relaxed);  // statistics only
  } else {
    q.stats.pending_calls.fetch_add(1, std::memory_order_relaxed);  // statistics only
  }
  return rc;
}

// [doc:schedule]
/// Make sure a pending call that will drain `q` is outstanding.
///
/// Thread: any.  Called by destructor callbacks on driver threads (no thread
/// state) and by entry points that retry.  Never allocates, never waits,
/// except inside the host's add_pending_call (CPython takes its pending-call
/// lock) and inside the optional test hook.
/// Memory ordering: reference: gate_enter (seq_cst), then claim() (seq_cst
/// exchange), which with the caller's earlier push forms the producer half
/// of the store-buffering pair.  Comparison variants, as shipped:
/// accepting() (acquire), [finalizing check], head_nonempty() (acquire),
/// claim() (acq_rel CAS).  The refusal path's unclaim() is release.
/// Errors: none thrown.  A refusal is counted in stats.schedule_failures and
/// reported as ScheduleResult::refused; the item stays queued for a retry.
/// Source: cuda-python PR #2371 (one outstanding pending call, retry on -1);
/// cuda_core/cuda/core/_cpp/resource_handles.cpp at cuda-core 1.2.0,
/// schedule(); Py_AddPendingCall, Python/ceval_gil.c v3.12.0.
/// @param q the queue to drain
/// @return what happened
template <class P>
ScheduleResult schedule(BasicQueue<P>& q) noexcept {
  if constexpr (P::gate) {
    if (!q.gate_enter()) {
      return ScheduleResult::not_accepting;
    }
  } else {
    if (!q.accepting()) {
      return ScheduleResult::not_accepting;
    }
    if constexpr (P::schedule_checks_finalizing) {
      const Host& host = q.host();
      if (host.finalizing != nullptr && host.finalizing()) {
        q.close();  // as shipped: stop() once finalization is seen
        return ScheduleResult::not_accepting;
      }
    }
    if constexpr (P::schedule_checks_head) {
      if (!q.head_nonempty()) {
        return ScheduleResult::empty;
      }
    }
  }
  ScheduleResult result = ScheduleResult::already_scheduled;
  if (q.claim()) {
    if constexpr (P::rearm) {
      const Host& host = q.host();
      q.set_claimed_at(host.now_ns != nullptr ? host.now_ns() : 0);
    }
    if (add_call(q) != 0) {
      // Refused: nothing was queued in CPython; give the claim back so the
      // next enqueue or entry point retries.  Our item is still in head_.
      if constexpr (P::rearm) {
        q.set_claimed_at(0);
      }
      q.unclaim();
      result = ScheduleResult::refused;
    } else {
      result = ScheduleResult::scheduled;
    }
  }
  if constexpr (P::gate) {
    q.gate_leave();
  }
  return result;
}
// [end-doc:schedule]

// [doc:rearm]
/// Re-arm a stale claim: if the outstanding claim is older than the stale
/// bound and only one pending call is outstanding, add a second one.
///
/// Thread: any (a producer on its fast path, an entry point).  Never waits,
/// except inside the host's add_pending_call.
/// Memory ordering: the claim's age and the call count are relaxed
/// heuristics (queue.hpp); the second call is added behind the in-flight
/// gate like any other, so shutdown still waits for it.  scheduled_ is not
/// touched: it stays true until a drain clears it.
/// Errors: none thrown.  A refusal undoes the count; the claim time moves
/// on, so the next attempt comes one stale bound later.
/// Source: this project; the lost call is the probe's `subinterp.runner`
/// (3.10, 3.11; bpo-10915).
/// @param q the queue
/// @return rearmed if a second call was added, otherwise already_scheduled
template <class P>
ScheduleResult rearm_if_stale(BasicQueue<P>& q) noexcept {
  static_assert(P::rearm, "only the reference re-arms");
  const Host& host = q.host();
  if (host.now_ns == nullptr) {
    return ScheduleResult::already_scheduled;
  }
  const std::int64_t seen = q.claimed_at();
  if (seen == 0) {
    return ScheduleResult::already_scheduled;
  }
  const std::int64_t now = host.now_ns();
  if (now - seen < q.stale_bound_ns() || !q.take_stale_claim(seen, now)) {
    return ScheduleResult::already_scheduled;
  }
  if (!q.scheduled_snapshot() || !q.claim_second_call()) {
    return ScheduleResult::already_scheduled;
  }
  if (!q.gate_enter()) {
    q.call_gone();
    return ScheduleResult::not_accepting;
  }
  const int rc = add_call(q, /*counted=*/true);
  q.gate_leave();
  if (rc != 0) {
    return ScheduleResult::refused;
  }
  q.stats.rearms.fetch_add(1, std::memory_order_relaxed);  // statistics only
  return ScheduleResult::rearmed;
}
// [end-doc:rearm]

/// Retry scheduling if work is queued and no pending call is claimed; in the
/// reference, also re-arm a stale claim.
///
/// Thread: any (entry points off the main thread can only do this; the
/// comparison variants do it on the main thread too, as cuda-core's entry
/// points call schedule()).  Never blocks beyond schedule().
/// Memory ordering: the emptiness test is a relaxed snapshot, used only to
/// skip a needless attempt: an item pushed just after it is its own
/// producer's to schedule.  The comparison variants call schedule() as is
/// (it tests head_ itself).
/// Errors: none thrown.
/// Source: cuda_core/cuda/core/_cpp/resource_handles.cpp at cuda-core 1.2.0
/// (retry_schedule() only calls schedule()).
/// @param q the queue
/// @return the scheduling result, or already_scheduled when nothing was tried
template <class P>
ScheduleResult retry_schedule(BasicQueue<P>& q) noexcept {
  if constexpr (P::variant == Variant::reference) {
    if (q.empty_snapshot()) {
      return ScheduleResult::empty;
    }
    if (q.scheduled_snapshot()) {
      return rearm_if_stale(q);
    }
    q.stats.retries.fetch_add(1, std::memory_order_relaxed);  // statistics only
    return schedule(q);
  } else {
    q.stats.retries.fetch_add(1, std::memory_order_relaxed);  // statistics only
    return schedule(q);
  }
}

}  // namespace deferred_cleanup
