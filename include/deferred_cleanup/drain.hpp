// SPDX-License-Identifier: Apache-2.0
// drain.hpp: the consumer, on the CPython main thread.
//
// A drain takes the whole list with head_.exchange(nullptr), reverses it to
// push order and runs each cleanup exactly once.  It loops until a take comes
// back empty.  Where it clears `scheduled_` is what the variants disagree on:
//
//  * reference (clear_then_take): the pending call clears `scheduled_` first
//    and only then takes.  An item the drain does not take was pushed after
//    the clear in S, so its producer's check reads false and it schedules a
//    new pending call.  Clear and take are seq_cst; the producer's push and
//    check are seq_cst (queue.hpp): no lost wakeup, on any hardware.
//  * seed and cuda-core-1.2 (take_clear_recheck): take until empty, then
//    clear (release), then re-check `head_` (acquire) and reschedule if it is
//    not empty, as PR #2371 describes ("picked up by its next loop iteration
//    or cause another pending call to be scheduled after scheduled_ is
//    cleared") and the 1.2.0 wheel does.  The re-check can read an old
//    `head_` while the producer's claim reads the old `true`: the lost
//    wakeup, which x86-64 shows (docs: "The lost wakeup on real hardware").
//
// Two ways in for the reference:
//
//  * pending_call(): the function given to Py_AddPendingCall.
//  * drain_at_entry(): called by every main-thread API entry point.  On
//    3.10-3.12 a pending call added from a thread with no thread state does
//    not run while the main thread stays busy in pure Python (gh-95820: the
//    eval breaker is only recomputed on the main thread when the GIL changes
//    hands).  The reference therefore drains directly at the next entry point
//    when the queue is non-empty: the delay is bounded by the time to the
//    next API call, and unbounded for a program that makes none.  A direct
//    drain does not clear scheduled_: a pending call may still be outstanding
//    and clearing the flag would let a producer add a second one.  The
//    comparison variants only retry scheduling at entry points, as cuda-core
//    does, which does nothing while a starved call keeps `scheduled_` set.
//
// Once the host is dead (shutdown.hpp) the reference's ways in return without
// touching any item: whatever is queued is leaked on purpose and counted by
// the backstop.  The comparison variants check finalization instead, as
// shipped.
//
// Re-entrancy: a cleanup may run Python code, and that code may call an API
// entry point, which in the reference drains.  CPython never nests pending
// calls (make_pending_calls returns at once while one runs: a static `busy`
// in Python/ceval.c v3.10.0 and v3.11.0, `pending->busy` in
// Python/ceval_gil.c v3.12.0, `handling_thread` in v3.13.0), so the entry
// point is the only way back in.  drain_all() guards it: a nested call sees
// draining() and returns 0, and the outer loop's next take collects what the
// nested one would have (run_list() itself has no guard).  The comparison
// variants' entry points never drain, as shipped.
#pragma once

#include <cstddef>
#include <cstdint>

#include "deferred_cleanup/item.hpp"
#include "deferred_cleanup/queue.hpp"
#include "deferred_cleanup/rearm.hpp"
#include "deferred_cleanup/scheduling.hpp"

namespace deferred_cleanup {

// [doc:drain]
/// Put the cleanups a stopped drain did not run back on the queue, in their
/// order, and make sure a pending call is outstanding for them.
///
/// Thread: main thread (the consumer).  Never blocks beyond schedule().
/// Memory ordering: each push() is P::push, as a producer's; schedule() is
/// the producer's slow path (scheduling.hpp), so the put-back items are
/// never left without a pending call while the queue accepts (after the
/// exit sequence closed it, the final drain takes them).
/// Errors: none thrown; a refused pending call leaves them queued for the
/// next entry point, as for any item.
/// Source: this project (the early stop of a drain; docs: Caveats).
/// @param q the queue
/// @param rest the untaken remainder of a taken list (FIFO), or nullptr
template <class P>
void put_back(BasicQueue<P>& q, DeferredCleanupItem* rest) noexcept {
  if (rest == nullptr) {
    return;
  }
  while (rest != nullptr) {
    DeferredCleanupItem* next = rest->next;
    q.push(rest);  // pushed oldest first: the next take_all() returns them in order
    rest = next;
  }
  schedule(q);  // the pending call re-armed for them
}

/// Run the cleanups of a taken (FIFO) list, each exactly once, or until the
/// host asks the drain to stop.
///
/// Thread: main thread.  Blocks as long as the cleanups do.
/// Memory ordering: none of its own; the list was acquired by take_all().
/// Each `next` is read before the item's cleanup runs, because the cleanup
/// may free the item.
/// Errors: none; cleanups are noexcept and a Python error inside one is the
/// host's to report (sys.unraisablehook), so one bad payload never stops
/// the rest.  Early stop: when `stopped` is given and the host's
/// stop_drain() says so after a cleanup, the rest of the list goes back on
/// the queue (put_back) and *stopped is set; nothing is lost or run twice.
/// Source: cuda-python PR #2371.
/// @param q the queue whose statistics are updated
/// @param list items returned by take_all()
/// @param stopped nullptr (never stop), or where to record an early stop
/// @return the number of cleanups run
template <class P>
std::size_t run_list(BasicQueue<P>& q, DeferredCleanupItem* list,
                     bool* stopped = nullptr) noexcept {
  std::size_t n = 0;
  const Host& host = q.host();
  while (list != nullptr) {
    DeferredCleanupItem* next = list->next;  // read before cleanup may free the item
    run_cleanup(list);
    ++n;
    list = next;
    if (stopped != nullptr && host.stop_drain != nullptr && host.stop_drain()) {
      *stopped = true;  // the host delivers what stopped it where the drain was entered
      put_back(q, list);
      break;
    }
  }
  // Once per list, not per item: a relaxed RMW is still a locked instruction on x86-64.
  q.stats.cleaned.fetch_add(n, std::memory_order_relaxed);  // statistics only
  return n;
}

/// Take and run until a take comes back empty, or until the host stops the
/// drain early (Host::stop_drain; the rest stays queued with a pending call
/// outstanding).  Does not touch scheduled_.
///
/// Thread: main thread.  Blocks as long as the cleanups do.
/// Memory ordering: each take_all() is P::take (acquire or seq_cst).
/// Errors: none.  Returns 0 without doing anything when called re-entrantly
/// from a cleanup or when the host is dead.
/// Source: cuda-python PR #2371.
/// @param q the queue to drain
/// @return the number of cleanups run
template <class P>
std::size_t drain_all(BasicQueue<P>& q) noexcept {
  if (q.draining() || !q.host_alive()) {
    return 0;
  }
  q.set_draining(true);
  std::size_t n = 0;
  bool stopped = false;
  while (!stopped) {
    DeferredCleanupItem* list = q.take_all();
    if (list == nullptr) {
      break;
    }
    n += run_list(q, list, &stopped);
  }
  q.set_draining(false);
  return n;
}

/// The pending-call function of policy P.
///
/// reference: account for the call (its token says whether it is the
/// claim's call); the claim's call clears scheduled_, then drains; a call a
/// re-arm superseded only drains.
/// seed, cuda-core-1.2: if the host is finalizing, stop accepting, clear and
/// return (leaking the queue, as shipped); otherwise take until empty, clear,
/// re-check head_ and reschedule when it is not empty.
///
/// Thread: main thread, called by the host's pending-call machinery with
/// the GIL held (CPython: make_pending_calls / _PyEval_MakePendingCalls).
/// Blocks as long as the cleanups do.
/// Memory ordering: reference: clear() then take_all(), both seq_cst: the
/// consumer half of the store-buffering pair.  Comparison variants: take
/// (acquire) until empty, clear (release), recheck (acquire): a
/// store-buffering pair that x86-TSO allows to lose the wakeup.
/// Errors: none thrown.  Returns the host's after_drain() (0, or -1 with an
/// exception set to deliver a KeyboardInterrupt or SystemExit raised by a
/// cleanup); otherwise 0, so that CPython raises nothing in the interrupted
/// Python code.  After the host died (reference) it touches nothing
/// (counted in stats.pending_calls_ignored).
/// Source: Python/ceval_gil.c make_pending_calls (v3.12.0): a non-zero
/// return means "an exception is set"; cuda-python PR #2371;
/// cuda_core/cuda/core/_cpp/resource_handles.cpp at cuda-core 1.2.0, drain().
/// @param arg the reference's CallToken*, or the comparison variants'
///        BasicQueue<P>*, given to add_pending_call
/// @return 0, or -1 with an exception set by the host
template <class P>
int pending_call(void* arg) noexcept {
  BasicQueue<P>* qp = nullptr;
  bool current = true;  // this call clears scheduled_
  if constexpr (P::rearm) {
    auto* token = static_cast<CallToken<P>*>(arg);
    qp = token->queue;
    // Re-arming: is this the claim's call (it clears scheduled_) or one a
    // re-arm superseded?  The number is read first thing (slots are reused).
    current = qp->rearm.call_ran(token->seq.load(std::memory_order_relaxed));
  } else {
    qp = static_cast<BasicQueue<P>*>(arg);
  }
  BasicQueue<P>& q = *qp;
  const Host& host = q.host();
  if constexpr (P::drain_shape == DrainShape::clear_then_take) {
    if (!q.host_alive()) {
      q.stats.pending_calls_ignored.fetch_add(1, std::memory_order_relaxed);  // statistics only
      return 0;
    }
    q.stats.drain_cycles.fetch_add(1, std::memory_order_relaxed);  // statistics only
    if (current) {
      if constexpr (P::rearm) {
        q.rearm.stop_stale_clock();  // re-arming: the claim's call has run
      }
      q.clear();  // before the take: consumer half of the store-buffering pair
    }
    // A superseded call does not clear: the claim's call is still coming and
    // will clear-then-take; draining without clearing is a direct drain.
    drain_all(q);
  } else {
    if constexpr (P::drain_checks_finalizing) {
      if (host.finalizing != nullptr && host.finalizing()) {
        q.close();
        q.clear();
        q.stats.leaked_finalizing.fetch_add(1, std::memory_order_relaxed);  // statistics only
        return 0;  // as shipped: leak intact payloads during shutdown
      }
    }
    q.stats.drain_cycles.fetch_add(1, std::memory_order_relaxed);  // statistics only
    while (DeferredCleanupItem* list = q.take_all()) {
      run_list(q, list);
    }
    q.clear();          // after the take loop: release store
    if (q.recheck()) {  // acquire load; may read an old head_ (store buffering)
      schedule(q);
    }
  }
  return host.after_drain != nullptr ? host.after_drain() : 0;
}
// [end-doc:drain]

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
      return rearm_if_stale(q);  // re-arming: a claim whose call may be lost
    }
    q.stats.retries.fetch_add(1, std::memory_order_relaxed);  // statistics only
    return schedule(q);
  } else {
    q.stats.retries.fetch_add(1, std::memory_order_relaxed);  // statistics only
    return schedule(q);
  }
}

/// What an entry point did.
///
/// Thread: returned to the caller of drain_at_entry().
/// Memory ordering: n/a (a value).  Errors: n/a.
/// Source: this project.
enum class EntryAction : std::uint8_t {
  nothing,      ///< queue empty, host dead, or already draining
  drained,      ///< reference on the main thread: drained directly
  rescheduled,  ///< retried scheduling (off the main thread, or a comparison variant)
};

// [doc:entry]
/// Called at every API entry point: bounded cleanup delay (gh-95820).
///
/// Thread: any.  On the main thread of a reference queue (the caller holds
/// the GIL, in the main interpreter) it drains directly (blocking as long as
/// the cleanups do) and re-arms a stale claim, outside a drain also past the
/// bound of superseded calls (rearm.hpp, rearm_if_stale); elsewhere,
/// and always for the comparison variants, it only retries scheduling, as
/// cuda-core's entry points do.
/// Memory ordering: the emptiness test is a relaxed snapshot: an item pushed
/// after it is its producer's to schedule.  The drain itself uses take_all().
/// Errors: none thrown.
/// Source: gh-95820 (pending calls from a thread without a thread state
/// starve while the main thread runs pure Python, 3.10-3.12);
/// cuda_core/cuda/core/_cpp/resource_handles.cpp at cuda-core 1.2.0
/// (retry_deferred_cleanup()).
/// @param q the queue
/// @return what was done
template <class P>
EntryAction drain_at_entry(BasicQueue<P>& q) noexcept {
  if constexpr (P::direct_drain) {
    if (!q.host_alive()) {
      return EntryAction::nothing;
    }
    if (q.host().is_main_thread()) {
      EntryAction done = EntryAction::nothing;
      if (!q.empty_snapshot() && !q.draining()) {
        q.stats.direct_drains.fetch_add(1, std::memory_order_relaxed);  // statistics only
        drain_all(q);  // gh-95820: do not wait for a pending call that may starve
        done = EntryAction::drained;
      }
      if (q.scheduled_snapshot()) {
        // Re-arming: restore the pending-call path after lost calls; outside
        // a drain also past the bound (rearm.hpp, rule 2).
        rearm_if_stale(q, !q.draining());
      }
      return done;
    }
    if (q.empty_snapshot()) {
      return EntryAction::nothing;
    }
    retry_schedule(q);
    return EntryAction::rescheduled;
  } else {
    if constexpr (P::schedule_checks_finalizing) {
      const Host& host = q.host();
      if (host.finalizing != nullptr && host.finalizing()) {
        return EntryAction::nothing;  // as shipped: retry_deferred_cleanup()
      }
    }
    return retry_schedule(q) == ScheduleResult::empty ? EntryAction::nothing
                                                      : EntryAction::rescheduled;
  }
}
// [end-doc:entry]

/// What drain_now() did.
///
/// Thread: returned to the caller of drain_now().
/// Memory ordering: n/a (a value).  Errors: n/a.
/// Source: this project (deferred_cleanup.drain_now).
enum class DrainNowStatus : std::uint8_t {
  drained,          ///< drained (possibly nothing); `cleaned` says how much
  not_main_thread,  ///< refused: cleanups run on the main thread only
  host_dead,        ///< refused: the host is dead, nothing is drained any more
  nested,           ///< called from a cleanup inside a drain: the outer drain takes the items
};

/// The outcome of drain_now(): its status and the cleanups it ran.
///
/// Thread: returned to the caller.  Memory ordering: n/a.  Errors: n/a.
/// Source: this project.
struct DrainNowResult {
  DrainNowStatus status = DrainNowStatus::drained;  ///< what happened
  std::size_t cleaned = 0;                          ///< cleanups run (drained only)
};

/// An explicit drain requested by the program (deferred_cleanup.drain_now):
/// run every queued cleanup now, on the main thread.  Does not touch
/// scheduled_ (as drain_all(), a direct drain).
///
/// Thread: the main thread only (else not_main_thread, nothing done).  Blocks
/// as long as the cleanups do.
/// Memory ordering: each take_all() is P::take; host_alive() is acquire.
/// Errors: none thrown; refusals are reported in the status (the CPython host
/// raises NotMainThreadError or ShutdownError for them).
/// Source: this project; gh-95820 (why a program may want to drain itself).
/// @param q the queue
/// @return the status and the number of cleanups run
template <class P>
DrainNowResult drain_now(BasicQueue<P>& q) noexcept {
  if (!q.host().is_main_thread()) {
    return {DrainNowStatus::not_main_thread, 0};
  }
  if (!q.host_alive()) {
    return {DrainNowStatus::host_dead, 0};
  }
  if (q.draining()) {
    return {DrainNowStatus::nested, 0};
  }
  q.stats.direct_drains.fetch_add(1, std::memory_order_relaxed);  // statistics only
  return {DrainNowStatus::drained, drain_all(q)};
}

}  // namespace deferred_cleanup
