// SPDX-License-Identifier: Apache-2.0
// rearm.hpp: the re-arm rule (reference): recover from pending calls that
// CPython accepted and then lost.
//
// A pending call that was accepted may still never
// run: on 3.10 and 3.11 a call added from a thread with no thread state while
// a subinterpreter holds the GIL goes to that interpreter and is lost (the
// probe's field `subinterp.runner`; Python/ceval.c v3.11.0, bpo-10915).  Then
// `scheduled_` would stay true for good and no producer would ever schedule
// again.  So a stale claim (below: seen outstanding for the stale bound)
// whose call has not run may be re-armed: one producer or entry point adds
// one more pending call, which becomes the claim's call, while the older
// ones may still be outstanding.  Each call of the reference carries a
// sequence number (rearm_state.hpp, CallToken); only the claim's call clears
// `scheduled_`, an older one only drains.  CPython runs a ring's pending
// calls first in, first out, so when a call numbered s runs, every older
// call of ours has run or was lost.
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
// When a claim is stale.  The claimant reads no clock: once its call is in
// the host's ring it only marks the claim "added, not yet timed"
// (kClaimUntimed, rearm_state.hpp).  The first re-arm check that looks at
// the claim (below) starts its stale clock; the claim is stale at a look at
// least the stale bound (default 1 s, deferred_cleanup.configure(
// stale_claim_s=...)) after that first look, i.e. once it has been SEEN
// outstanding for the bound.  A re-armer, which has just looked, starts the
// clock of its own call at once.  So a lost call is recovered at the first
// look at least one bound after the first look at its claim, where the rule
// before timed from the add: recovery needs one more look (the one that
// starts the clock) and comes later by at most the time from the add to
// that first look.  Under either rule only a look re-arms, so a claim nobody
// looks at is never recovered; under this one it is not even stale.  A
// claim is still never stale before its call is in the host's ring (the
// mark is stored only after the add).
//
// Hence at most three of the queue's calls are ever outstanding (two from
// producers, one from the main thread: kMaxCallsOutstanding; calls_outstanding()
// below), and any number
// of consecutive lost calls from foreign threads is recovered at the next
// main-thread entry point once the claim is stale.  A producer looks at the
// claim's age on about one fast-path hit in 2^rearm_sample_log2 (policy.hpp
// states the rate), chosen by a hash of the item address (a clock read on
// every hit would double the fast path's cost);
// an entry point off the main thread (retry_schedule) and main-thread entry
// points look every time.
//
// Where the core calls the rule: the destructor's fast path on a sampled hit
// (callback.hpp), the retry of an entry point off the main thread
// (drain.hpp, retry_schedule) and the main-thread entry point (drain.hpp,
// drain_at_entry).  Its state and the hooks the core calls on the common path
// are in rearm_state.hpp.
#pragma once

#include <cstdint>

#include "deferred_cleanup/host.hpp"
#include "deferred_cleanup/queue.hpp"
#include "deferred_cleanup/rearm_state.hpp"
#include "deferred_cleanup/scheduling.hpp"

namespace deferred_cleanup {

namespace detail {
/// Enter the gate around a re-arm's host call: P's in-flight gate, or, for a
/// policy without one, the accepting_ check that schedule() makes in its
/// place.  No supported policy re-arms without the gate; the benchmarks'
/// slow-path breakdown (tests/bench/variants.hpp, reference-no-gate) does.
///
/// Thread: as rearm_if_stale().  Never blocks.
/// Memory ordering: BasicQueue::gate_enter(), or BasicQueue::accepting().
/// Errors: none.
/// Source: this project (schedule()'s gate switch, scheduling.hpp).
/// @param q the queue
/// @return true if the caller may call the host
template <class P>
bool rearm_gate_enter(BasicQueue<P>& q) noexcept {
  if constexpr (P::gate) {
    return q.gate_enter();
  } else {
    return q.accepting();
  }
}

/// Leave what rearm_gate_enter() entered: the in-flight gate, or nothing.
///
/// Thread: the caller that entered.  Never blocks.
/// Memory ordering: BasicQueue::gate_leave() (release), or none.
/// Errors: none.
/// Source: this project (schedule()'s gate switch, scheduling.hpp).
/// @param q the queue
template <class P>
void rearm_gate_leave(BasicQueue<P>& q) noexcept {
  if constexpr (P::gate) {
    q.gate_leave();
  }
}
}  // namespace detail

// [doc:rearm]
/// Look at the outstanding claim and re-arm it if stale: the first look at a
/// claim whose call was added starts its stale clock (time_claim()); a look
/// at least the stale bound after that finds it stale and adds one more
/// pending call that becomes the claim's call.  Within
/// the bound (no superseded call recorded) anyone may; past it (a superseded
/// call still recorded: it and the call that superseded it may both be lost)
/// only the main thread at an entry point, with at most one such call
/// outstanding.
///
/// Thread: any (a producer on its fast path, an entry point).  With
/// `main_entry` the caller must be the main thread, holding the GIL in the
/// main interpreter and not inside a drain (drain_at_entry()).  Never waits,
/// except inside the host's add_pending_call.
/// Memory ordering: the claim's time (untimed or a stamp), its sequence
/// number and the records of superseded and main-thread calls are relaxed
/// heuristics (rearm_state.hpp); the
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
  RearmState<P>& r = q.rearm;
  const Host& host = q.host();
  if (host.now_ns == nullptr) {
    return ScheduleResult::already_scheduled;
  }
  std::int64_t seen = r.claimed_at();
  if (seen == 0) {
    return ScheduleResult::already_scheduled;
  }
  const std::int64_t now = host.now_ns();
  if (seen == kClaimUntimed) {
    // The first look at an added claim starts its stale clock; one looker wins.
    if (!r.time_claim(now)) {
      return ScheduleResult::already_scheduled;
    }
    seen = claim_stamp(now);
  }
  if (now - seen < q.settings.stale_claim_ns.load(std::memory_order_relaxed)) {  // a setting
    return ScheduleResult::already_scheduled;
  }
  if (r.superseded() != 0 && (!main_entry || r.main_rearmed() != 0)) {
    return ScheduleResult::already_scheduled;  // at the bound: leave the stale claim alone
  }
  if (!r.take_stale_claim(seen)) {
    return ScheduleResult::already_scheduled;
  }
  const std::uint64_t old_seq = r.claim_seq();
  if (old_seq == 0 || !q.scheduled_snapshot()) {
    return ScheduleResult::already_scheduled;
  }
  // Within the bound: supersede the claim's call.  Past it: the main thread's call.
  const bool within = r.take_supersede(old_seq);
  if (!within && !main_entry) {
    r.start_stale_clock(old_seq, seen);  // give the stale claim back, still stale
    return ScheduleResult::already_scheduled;
  }
  if (!detail::rearm_gate_enter(q)) {
    if (within) r.release_supersede();
    return ScheduleResult::not_accepting;
  }
  auto* token = r.new_call_token();
  const std::uint64_t new_seq = token->seq.load(std::memory_order_relaxed);  // our own store
  if (!within && !r.take_main_rearm(new_seq)) {
    detail::rearm_gate_leave(q);  // a main-thread call is still outstanding: at the bound
    r.start_stale_clock(old_seq, seen);
    return ScheduleResult::already_scheduled;
  }
  auto release_record = [&] {
    if (within) {
      r.release_supersede();
    } else {
      r.release_main_rearm(new_seq);
    }
  };
  if (!r.move_claim_seq(old_seq, new_seq)) {
    // The claim's call ran meanwhile and took the claim back: nothing to re-arm.
    release_record();
    detail::rearm_gate_leave(q);
    return ScheduleResult::already_scheduled;
  }
  const int rc = add_call(q, token);
  bool claim_given_back = false;
  if (rc != 0) {
    release_record();
    if (r.move_claim_seq(new_seq, old_seq)) {  // the old call is the claim's call again ...
      if (r.ran_at_least(old_seq) && r.move_claim_seq(old_seq, 0)) {
        // ... unless it ran meanwhile (as a superseded call: it drained but
        // did not clear).  Then no call is outstanding: give the claim back,
        // as after any refusal, and retry below like a refused producer.
        q.unclaim();
        claim_given_back = true;
      } else {
        r.start_stale_clock(old_seq, host.now_ns());  // retried one bound later
      }
    }
  } else {
    r.start_stale_clock(new_seq, host.now_ns());
  }
  detail::rearm_gate_leave(q);
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

/// Pending calls of the queue possibly outstanding, an upper bound: the
/// current claim's call, if claimed, plus a superseded one, plus the main
/// thread's call past the bound (which also stands for the claim's call
/// that it superseded, unrecorded).  Snapshot (statistics, tests).
///
/// Thread: any.  Memory ordering: relaxed.  Errors: none.
/// Source: this project.
/// @param q the queue
/// @return 0, 1, 2 or 3
template <class P>
std::uint32_t calls_outstanding(const BasicQueue<P>& q) noexcept {
  return (q.scheduled_snapshot() ? 1u : 0u) + q.rearm.superseded() + q.rearm.main_rearmed();
}

}  // namespace deferred_cleanup
