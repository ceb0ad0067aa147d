// SPDX-License-Identifier: Apache-2.0
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
// Re-arming (reference; rearm.hpp).  A pending call that CPython accepted may
// still never run (3.10 and 3.11 lose one added while a subinterpreter holds
// the GIL).  Then `scheduled_` would stay true for good.  The re-arm rule adds
// one more call for a claim that stayed outstanding too long, so that at most
// three of the queue's calls are ever outstanding; this file only gives the
// claim's call a numbered token and, once it is in the ring, marks the claim
// added but untimed (two hooks; no clock read: the first re-arm check that
// looks at the claim starts its stale clock).
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
//
// The one loop between the headers.  Scheduling adds a pending call whose
// function, pending_call<P>, is the drain (drain.hpp); the comparison
// variants' drain re-checks `head_` and calls schedule() again.  So
// scheduling.hpp declares pending_call<P> ahead (below, before add_call) and
// drain.hpp, which includes this file, defines it: the declaration closes the
// scheduling <-> drain loop, and nothing else crosses it.
#pragma once

#include <cstdint>

#include "deferred_cleanup/host.hpp"
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
  empty,              ///< head_ read empty (comparison variants), or a null typed item
  rearmed,            ///< a stale claim was re-armed: one more call was added
};

// The pending-call function of policy P, defined (and documented) in
// drain.hpp: declared here to close the scheduling <-> drain loop (see this
// file's essay, "The one loop").
template <class P>
int pending_call(void* arg) noexcept;

/// Call the host, counting the outcome.  Internal to schedule() and rearm.
///
/// The reference passes a call token (rearm_state.hpp, CallToken) as the pending
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
/// claim() (acq_rel CAS); cuda-core-1.2-fixed: gate_enter (seq_cst) in
/// place of accepting(), then the shipped tests and a fenced claim().  The refusal path's unclaim()
/// is release. Errors: none thrown.  A refusal is counted in stats.schedule_failures and reported
/// as ScheduleResult::refused; the item stays queued for a retry. Source: cuda-python PR #2371 (one
/// outstanding pending call, retry on -1); cuda_core/cuda/core/_cpp/resource_handles.cpp at
/// cuda-core 1.2.0, schedule(); Py_AddPendingCall, Python/ceval_gil.c v3.12.0.
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
  }
  // The shipped tests (cuda-core 1.2.0); with a gate (cuda-core-1.2-fixed)
  // they are made inside it, so the exit hook waits for a producer that
  // passed them.
  if constexpr (P::schedule_checks_finalizing) {
    const Host& host = q.host();
    if (host.finalizing != nullptr && host.finalizing()) {
      q.close();  // as shipped: stop() once finalization is seen
      if constexpr (P::gate) q.gate_leave();
      return ScheduleResult::not_accepting;
    }
  }
  if constexpr (P::schedule_checks_head) {
    if (!q.head_nonempty()) {
      if constexpr (P::gate) q.gate_leave();
      return ScheduleResult::empty;
    }
  }
  ScheduleResult result = ScheduleResult::already_scheduled;
  if (q.claim()) {
    void* arg = &q;
    [[maybe_unused]] std::uint64_t seq = 0;
    if constexpr (P::rearm) {
      CallToken<P>* token = q.rearm.token_for_claim();   // re-arming: a numbered token
      seq = token->seq.load(std::memory_order_relaxed);  // our own store
      arg = token;
    }
    if (add_call(q, arg) == 0) {
      if constexpr (P::rearm) {
        q.rearm.call_added(seq, q.host());  // re-arming: in the ring; untimed until a look
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

}  // namespace deferred_cleanup
