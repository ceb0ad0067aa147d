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
// be re-armed: one producer or entry point adds one more pending call, which
// becomes the claim's call, while the older ones may still be outstanding.
// Each call of the reference carries a sequence number (queue.hpp,
// CallToken); only the claim's call clears `scheduled_`, an older one only
// drains.  CPython runs a ring's pending calls first in, first out, so when
// a call numbered s runs, every older call of ours has run or was lost.
//
//  1. Within the bound.  A re-arm records the superseded call's number
//     (`superseded_seq_`, 0 -> n) and is allowed only while none is
//     recorded; the record is cleared when that call or any newer one runs.
//     So producers alone keep at most two of our calls outstanding.
//  2. Past the bound, the main thread only.  If the superseding call is lost
//     too, no newer call ever runs and the record is never cleared.  So a
//     main-thread entry point (GIL held, outside a drain) that finds the
//     claim stale and a superseded call recorded adds one more call, which
//     becomes the claim's call; its own record (`main_seq_`, 0 -> its
//     number) allows one such call at a time and is cleared when it or any
//     newer call runs.  Producers never add a call past the bound, and leave
//     a stale claim they may not re-arm as they found it.
//  3. Why the main thread's call is not lost.  With the GIL held in the main
//     interpreter (the module imports nowhere else, module.cpp), the call
//     goes to the main interpreter's ring: on 3.10 and 3.11
//     Py_AddPendingCall takes the interpreter of _PyThreadState_GET(), the
//     caller's own thread state (Python/ceval.c v3.10.0, v3.11.0); on 3.12+
//     always the main interpreter's main-thread queue (Python/ceval_gil.c
//     v3.12.0, v3.13.0, gh-104812).  And the add is made on the main thread,
//     so it sets the eval breaker (unlike gh-95820's foreign add).  When it
//     runs it is the claim's call: it clears `scheduled_`, drains, and
//     clears both records, and the next enqueue schedules as usual.
//
// Hence at most three of the queue's calls are ever outstanding (two from
// producers, one from the main thread; `calls_outstanding`), and any number
// of consecutive lost calls from foreign threads is recovered at the next
// main-thread entry point once the claim is stale.  A producer looks at the
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
// embedding runtime is in `Host` (host.hpp), a struct of plain function
// pointers.  The CPython host lives in reference/src/host.cpp; tests/cpp has a
// fake.
#pragma once

#include <cstdint>

#include "deferred_cleanup/queue.hpp"

namespace deferred_cleanup {

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
  rearmed,            ///< a stale claim was re-armed: one more call was added
};

template <class P>
int pending_call(void* arg) noexcept;  // drain.hpp

/// Call the host, counting the outcome.  Internal to schedule() and rearm.
///
/// The reference passes a call token (queue.hpp, CallToken) as the pending
/// call's argument, whose number its caller made the claim's before the call
/// (on 3.13+ the call may run before add_pending_call returns); the
/// comparison variants pass the queue, as shipped.
///
/// Thread: the producer that holds the claim (or the right to supersede).
/// Memory ordering: none of its own.
/// Errors: none thrown; returns the host's result.
/// Source: Py_AddPendingCall, Python/ceval_gil.c v3.12.0.
/// @param q the queue
/// @param arg the pending call's argument (a CallToken* or the queue)
/// @return 0 when accepted, -1 when refused
template <class P>
int add_call(BasicQueue<P>& q, void* arg) noexcept {
  const Host& host = q.host();
  if (host.in_gate != nullptr) {
    host.in_gate(&q);  // test hook: hold this producer inside the window
  }
  q.stats.schedule_attempts.fetch_add(1, std::memory_order_relaxed);  // statistics only
  const int rc = host.add_pending_call(&pending_call<P>, arg);
  if (rc != 0) {
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
    void* arg = &q;
    [[maybe_unused]] std::uint64_t seq = 0;
    if constexpr (P::rearm) {
      q.set_claimed_at(0);  // not stale before our call is in the ring
      auto* token = q.new_call_token();
      seq = token->seq.load(std::memory_order_relaxed);  // our own store
      q.set_claim_seq(seq);
      arg = token;
    }
    if (add_call(q, arg) == 0) {
      if constexpr (P::rearm) {
        const Host& host = q.host();
        if (host.now_ns != nullptr) q.start_stale_clock(seq, host.now_ns());
      }
      result = ScheduleResult::scheduled;
    } else {
      // Refused: nothing was queued in CPython; give the claim back so the
      // next enqueue or entry point retries.  Our item is still in head_.
      q.unclaim();
      result = ScheduleResult::refused;
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
/// bound, add one more pending call that becomes the claim's call.  Within
/// the bound (no superseded call recorded) anyone may; past it (a superseded
/// call still recorded: it and the call that superseded it may both be lost)
/// only the main thread at an entry point, with at most one such call
/// outstanding.
///
/// Thread: any (a producer on its fast path, an entry point).  With
/// `main_entry` the caller must be the main thread, holding the GIL in the
/// main interpreter and not inside a drain (drain_at_entry()).  Never waits,
/// except inside the host's add_pending_call.
/// Memory ordering: the claim's age, its sequence number and the records of
/// superseded and main-thread calls are relaxed heuristics (queue.hpp); the
/// call is added behind the in-flight gate like any other, so shutdown still
/// waits for it.  scheduled_ is not touched: it stays true until the claim's
/// call clears it.
/// Errors: none thrown.  A refusal restores the claim's call and the record;
/// the claim time moves on, so the next attempt comes one stale bound later.
/// A caller that may not re-arm leaves the claim's time as it found it, so
/// that the next main-thread entry point still sees it stale.
/// Source: this project; the lost call is the probe's `subinterp.runner`
/// (3.10, 3.11; bpo-10915); where a main-thread call goes: Py_AddPendingCall,
/// Python/ceval.c v3.11.0, Python/ceval_gil.c v3.12.0 and v3.13.0.
/// @param q the queue
/// @param main_entry true only from a main-thread entry point outside a drain
/// @return rearmed if a call was added, refused or not_accepting when one
///         could not be, otherwise already_scheduled
template <class P>
ScheduleResult rearm_if_stale(BasicQueue<P>& q, bool main_entry = false) noexcept {
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
  if (now - seen < q.settings.stale_claim_ns.load(std::memory_order_relaxed)) {  // a setting
    return ScheduleResult::already_scheduled;
  }
  if (q.superseded() != 0 && (!main_entry || q.main_rearmed() != 0)) {
    return ScheduleResult::already_scheduled;  // at the bound: leave the stale claim alone
  }
  if (!q.take_stale_claim(seen)) {
    return ScheduleResult::already_scheduled;
  }
  const std::uint64_t old_seq = q.claim_seq();
  if (old_seq == 0 || !q.scheduled_snapshot()) {
    return ScheduleResult::already_scheduled;
  }
  // Within the bound: supersede the claim's call.  Past it: the main thread's call.
  const bool within = q.take_supersede(old_seq);
  if (!within && !main_entry) {
    q.start_stale_clock(old_seq, seen);  // give the stale claim back, still stale
    return ScheduleResult::already_scheduled;
  }
  if (!q.gate_enter()) {
    if (within) q.release_supersede();
    return ScheduleResult::not_accepting;
  }
  auto* token = q.new_call_token();
  const std::uint64_t new_seq = token->seq.load(std::memory_order_relaxed);  // our own store
  if (!within && !q.take_main_rearm(new_seq)) {
    q.gate_leave();  // a main-thread call is still outstanding: at the bound
    q.start_stale_clock(old_seq, seen);
    return ScheduleResult::already_scheduled;
  }
  auto release_record = [&] {
    if (within) {
      q.release_supersede();
    } else {
      q.release_main_rearm(new_seq);
    }
  };
  if (!q.move_claim_seq(old_seq, new_seq)) {
    // The claim's call ran meanwhile and took the claim back: nothing to re-arm.
    release_record();
    q.gate_leave();
    return ScheduleResult::already_scheduled;
  }
  const int rc = add_call(q, token);
  bool claim_given_back = false;
  if (rc != 0) {
    release_record();
    if (q.move_claim_seq(new_seq, old_seq)) {  // the old call is the claim's call again ...
      if (q.ran_at_least(old_seq) && q.move_claim_seq(old_seq, 0)) {
        // ... unless it ran meanwhile (as a superseded call: it drained but
        // did not clear).  Then no call is outstanding: give the claim back,
        // as after any refusal, and retry below like a refused producer.
        q.unclaim();
        claim_given_back = true;
      } else {
        q.start_stale_clock(old_seq, host.now_ns());  // retried one bound later
      }
    }
  } else {
    q.start_stale_clock(new_seq, host.now_ns());
  }
  q.gate_leave();
  if (claim_given_back) {
    return schedule(q);  // items may be queued behind the claim we held
  }
  if (rc != 0) {
    return ScheduleResult::refused;
  }
  q.stats.rearms.fetch_add(1, std::memory_order_relaxed);  // statistics only
  if (!within) {
    q.stats.main_rearms.fetch_add(1, std::memory_order_relaxed);  // statistics only
  }
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
