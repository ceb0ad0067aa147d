// SPDX-License-Identifier: Apache-2.0
// queue.hpp: the process-wide intrusive MPSC queue and its flags.
//
// Producers are driver threads running user-object destructors; there may be
// any number of them and they hold no Python thread state.  The single
// consumer is the CPython main thread.  The queue is a Treiber-style stack:
// a producer links its item in front of `head_` with one CAS; the consumer
// takes the whole list at once with `head_.exchange(nullptr)` and reverses it,
// so cleanups run in push (FIFO) order.  A taken list is private to the
// consumer, so there is no ABA problem: nodes are never popped one by one
// while producers race on them.
//
// Besides `head_` the queue carries:
//   scheduled_          true while a pending call for the drain is claimed, so
//                       any number of producers cause at most one pending call
//                       (up to three after re-arms, rearm.hpp);
//   accepting_          false once shutdown closed the door: producers still
//                       push but no longer call into the host;
//   in_flight_          producers between their `accepting_` check and the end
//                       of their host call (the in-flight gate, shutdown.hpp);
//   alive_              false once the host may no longer run cleanups;
//   draining_           a drain runs on the main thread (re-entrancy guard);
//   stats, settings     the host's view (host.hpp);
//   rearm               the re-arm rule's state, in its own struct
//                       (rearm_state.hpp): the core touches it only through
//                       named hooks, so this file can be read without it.
//
// Store buffering (the lost wakeup).  A producer does  push(head_) ; read
// scheduled_.  The reference's drain does  clear(scheduled_) ; read head_.
// Under acquire/release both reads may miss the other side's write (the
// classic SB shape): the producer sees "already scheduled" and makes no
// pending call, the drain sees an empty list and returns, and the item waits
// for the next unrelated wakeup: a lost wakeup.  seq_cst on all four
// operations puts them in one total order S, and whichever write comes first
// in S is seen by the other side's read.  (Of the four, the check alone
// could be acquire: push and take_all are both read-modify-writes of head_,
// so a take that the push reads from synchronizes with it, and the clear
// happens before the check; herd7 says so,
// tests/litmus/wakeup_fast_sb_check_acquire.litmus.  It stays seq_cst,
// which on x86-64 is the same plain `mov`.)  The in-flight gate has the same
// shape (in_flight_++ ; read accepting_  vs  accepting_=false ; read
// in_flight_) and the same remedy.
//
// The comparison variants drain the other way round (take until empty, then
// clear, then re-check head_).  There the SB pair is the drain's clear and
// re-check against the producer's push and claim; with a release clear and an
// acquire re-check it is allowed, and on x86-64 it happens: the clear is a
// plain `mov` that can wait in the store buffer while the re-check reads an
// old head_ (docs: "The lost wakeup on real hardware").
//
// Every order is a constant of the policy (policy.hpp), so each variant
// compiles to its own instruction shape.
//
// [contract-table]
// The contract: the queue's states against its operations (reference orders;
// the comparison variants' are in policy.hpp).  This table is the one
// statement of it; docs/contract.rst renders it from here.
//
// States.  One lifecycle state and one scheduling state at a time:
//   OPEN     accepting_, alive_     import .. the exit hook's close()
//   CLOSED   !accepting_, alive_    close() .. CPython's finalizing flag
//   DEAD     !alive_                mark_host_dead() .. process end
//   IDLE     !scheduled_            no claim: the next producer claims
//   CLAIMED  scheduled_             one claim; its pending call outstanding
//                                   (kMaxCallsOutstanding with re-arms)
//
// Who.  P = any thread, any number at once, also with no thread state and
// after finalization (driver threads).  T = any Python thread.  M = the main
// thread, GIL held: one M row at a time, never nested (CPython runs no
// pending call inside another).  B = the Py_AtExit backstop.  P rows run
// concurrently with every row.
//
// op              who  in states   effect             order    pairs with
// --------------  ---  ----------  -----------------  -------  ------------
// push            P    all         item on head_      seq_cst  take_all
// check_scheduled P    all         read scheduled_    seq_cst  clear (SB)
// gate_enter      P    all         in_flight_ + 1,    seq_cst  close (SB)
//                                  read accepting_
// claim           P    OPEN        IDLE -> CLAIMED    seq_cst  clear
//                                  (one winner)
// add call        P    OPEN, in    the host queues    host's   pending_call
//                      the gate    pending_call       lock
// unclaim         P    OPEN        CLAIMED -> IDLE    release  next claim
//                                  (host refused)
// gate_leave      P    any         in_flight_ - 1     release  in_flight
// clear           M    alive       CLAIMED -> IDLE    seq_cst  check (SB)
//                                  (the claim's call)
// take_all        M    alive       take head_         seq_cst  push
// cleanup         M    alive       payload released   none     -
// close           M,B  OPEN        OPEN -> CLOSED     seq_cst  gate_enter
// in_flight       M    CLOSED      wait until 0       seq_cst  gate_leave
// mark_host_dead  T,B  alive       -> DEAD            release  host_alive
// host_alive      any  all         read alive_        acquire  mark_host_dead
//
// A push after close() gets no pending call: a main-thread drain before
// DEAD cleans it; in DEAD nothing does and B counts it as leaked.  Each
// pushed item is cleaned at most once, on M, while alive.
// [end-contract-table]
//
// The queue is published once, at module import, through an atomic pointer
// and never freed: a destructor callback that arrives arbitrarily late (after
// finalization) still finds valid memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "deferred_cleanup/host.hpp"
#include "deferred_cleanup/item.hpp"
#include "deferred_cleanup/policy.hpp"
#include "deferred_cleanup/rearm_state.hpp"

namespace deferred_cleanup {

/// The process-wide MPSC queue plus its scheduling and shutdown flags, with
/// the memory orders and protocol shape of policy `P`.
///
/// Thread: push(), check_scheduled(), claim(), unclaim(), gate_enter(),
/// gate_leave(), head_nonempty() from any thread (producers); take_all(),
/// clear(), recheck() and the drain flag from the consumer (main) thread;
/// close(), in_flight() and mark_host_dead() from the shutdown path.  Nothing
/// blocks: every operation is one atomic instruction or a CAS loop that
/// retries only when another thread won.
/// Memory ordering: each member names its order (a constant of `P`) and what
/// it synchronizes with; queue.hpp's essay gives the two handshakes.
/// Errors: none; no operation can fail.
/// Source: cuda-python PR #2371 (queue shape); Treiber, "Systems Programming:
/// Coping with Parallelism" (IBM RJ 5118, 1986) for the CAS stack.
template <class P>
class BasicQueue {
 public:
  /// The policy: memory orders and protocol shape (policy.hpp).
  using Policy = P;

  /// Construct an idle queue: empty, not scheduled, accepting, host alive.
  ///
  /// Thread: any (the CPython host constructs it at module import, then
  /// publishes it).  Never blocks.
  /// Memory ordering: plain initialisation; made visible to other threads by
  /// the release of the publication (publish_queue()).
  /// Errors: none.
  /// Source: cuda-python PR #2371 (queue published once at import).
  /// @param host the host the scheduling and drain functions call; must
  ///        outlive the queue (in practice: static storage)
  explicit BasicQueue(const Host* host) noexcept : host_(host) {}

  BasicQueue(const BasicQueue&) = delete;
  BasicQueue& operator=(const BasicQueue&) = delete;

  /// The variant of `P`.
  ///
  /// Thread: any.  Memory ordering: n/a (a constant).  Errors: none.
  /// Source: policy.hpp.
  /// @return P::variant
  static constexpr Variant variant() noexcept { return P::variant; }

  /// The host given at construction.
  ///
  /// Thread: any.  Memory ordering: immutable.  Errors: none.
  /// Source: scheduling.hpp (host interface).
  /// @return the host; valid for the queue's life
  const Host& host() const noexcept { return *host_; }

  // [doc:queue-push]
  /// Push one item (producer side).
  ///
  /// Thread: any thread, typically a driver thread with no Python thread
  /// state.  Lock-free: the CAS loop only repeats when another producer or
  /// the consumer changed `head_` in between.  Never allocates.
  /// Memory ordering: the successful CAS is P::push (release in the
  /// comparison variants, seq_cst in the reference).  Release publishes the
  /// item's fields to the consumer's take_all(); seq_cst also puts the push
  /// in S before this producer's check of `scheduled_`.
  /// Errors: none.
  /// Source: cuda-python PR #2371; Treiber stack.  Reporting the
  /// empty -> non-empty transition follows folly's AtomicIntrusiveLinkedList
  /// (insertHead returns whether the list was empty).
  /// @param item item to push; must not be in any list
  /// @return true when the list was empty before this push
  bool push(DeferredCleanupItem* item) noexcept {
    // Relaxed first read: only a guess for the CAS; the CAS validates it.
    DeferredCleanupItem* expected = head_.load(std::memory_order_relaxed);
    do {
      item->next = expected;  // plain store, published by the CAS below
      // Success order P::push: publishes item->next and the payload to the
      // consumer's exchange (take); seq_cst in the reference (wakeup.push).
    } while (!head_.compare_exchange_weak(expected, item, P::push, std::memory_order_relaxed));
    return expected == nullptr;
  }
  // [end-doc:queue-push]

  // [doc:queue-take]
  /// Take every queued item at once and return them oldest first.
  ///
  /// Thread: the consumer (main thread) only.  Never blocks; O(n) to reverse.
  /// Memory ordering: the exchange is P::take (acquire or seq_cst).  Acquire
  /// synchronizes with every push CAS it reads (a release sequence of RMWs on
  /// head_), so all item fields are visible.  seq_cst in the reference also
  /// puts it in S after the drain's clear().
  /// Errors: none.
  /// Source: cuda-python PR #2371 (the drain takes the whole list with
  /// head_.exchange(nullptr)).
  /// @return the taken items in FIFO order linked through `next`, or nullptr
  DeferredCleanupItem* take_all() noexcept {
    // Synchronizes with every producer's push CAS (wakeup.take).
    DeferredCleanupItem* lifo = head_.exchange(nullptr, P::take);
    DeferredCleanupItem* fifo = nullptr;
    while (lifo != nullptr) {
      DeferredCleanupItem* next = lifo->next;
      lifo->next = fifo;
      fifo = lifo;
      lifo = next;
    }
    return fifo;
  }
  // [end-doc:queue-take]

  /// Whether the queue looked empty at some instant.  Snapshot only: use it
  /// to skip needless work, never for a decision that a later take_all()
  /// does not re-check.
  ///
  /// Thread: any.  Never blocks.
  /// Memory ordering: relaxed load; synchronizes with nothing.
  /// Errors: none.
  /// Source: this project.
  /// @return true if head_ was null when read
  bool empty_snapshot() const noexcept {
    // Snapshot only; no ordering needed.
    return head_.load(std::memory_order_relaxed) == nullptr;
  }

  /// The comparison variants' test of `head_` before claiming (schedule()
  /// returns when it reads null).
  ///
  /// Thread: any.  Never blocks.
  /// Memory ordering: P::check (acquire): synchronizes with the push CAS it
  /// reads.
  /// Errors: none.
  /// Source: cuda_core/cuda/core/_cpp/resource_handles.cpp at cuda-core
  /// 1.2.0, schedule().
  /// @return true if head_ was not null when read
  bool head_nonempty() const noexcept {
    // Reads a push CAS (wakeup.check in the comparison variants).
    return head_.load(P::check) != nullptr;
  }

  /// The drain's re-check of `head_` after clearing `scheduled_`
  /// (take_clear_recheck shape only).
  ///
  /// Thread: consumer (main thread).  Never blocks.
  /// Memory ordering: P::recheck (acquire).  With the release clear() before
  /// it, this is the consumer half of a store-buffering pair that
  /// acquire/release does not forbid and x86-TSO does not either.
  /// Errors: none.
  /// Source: cuda_core/cuda/core/_cpp/resource_handles.cpp at cuda-core
  /// 1.2.0, drain().
  /// @return true if head_ was not null when read
  bool recheck() const noexcept {
    if constexpr (sb_fences_of<P>()) {
      // CudaCore12FixedPolicy: orders the clear before this load (fixed.fence).
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    // After the clear in program order, but not in S (wakeup.recheck).
    return head_.load(P::recheck) != nullptr;
  }

  /// The reference's fast-path check: is a pending call already claimed?
  ///
  /// Thread: any producer, right after its push.  Never blocks.
  /// Memory ordering: P::check (seq_cst): in S after this producer's push.
  /// If it reads true from a claim whose drain has not cleared yet, that
  /// drain's clear and take come later in S and its take sees the push; if
  /// the clear came first in S, this load reads false and the producer
  /// claims itself.
  /// Errors: none.
  /// Source: this project (docs/design/callback).
  /// @return scheduled_ as read
  bool check_scheduled() const noexcept {
    // In S after our push; pairs with the drain's clear (wakeup.check).
    return scheduled_.load(P::check);
  }

  /// Try to become the one producer that schedules the drain: scheduled_
  /// false -> true.
  ///
  /// Thread: any.  Never blocks.
  /// Memory ordering: P::claim.  The reference uses an exchange (seq_cst);
  /// the comparison variants a strong CAS (acq_rel, failure relaxed), as
  /// shipped.  Either reads the latest value in scheduled_'s modification
  /// order.
  /// Errors: none.
  /// Source: cuda-python PR #2371 (one pending call per claim).
  /// @return true if this call changed scheduled_ from false to true
  bool claim() noexcept {
    if constexpr (P::variant == Variant::reference) {
      // RMW, reads the drain's clear or a later claim (wakeup.claim).
      return !scheduled_.exchange(true, P::claim);
    } else {
      bool expected = false;
      if constexpr (sb_fences_of<P>()) {
        // CudaCore12FixedPolicy: orders the push before the claim (fixed.fence).
        std::atomic_thread_fence(std::memory_order_seq_cst);
      }
      // As shipped: CAS with acq_rel, failure relaxed (wakeup.claim).
      return scheduled_.compare_exchange_strong(expected, true, P::claim,
                                                std::memory_order_relaxed);
    }
  }

  /// Give the claim back after the host refused the pending call, so the next
  /// enqueue or entry point retries.
  ///
  /// Thread: the producer that holds the claim.  Never blocks.
  /// Memory ordering: release; read by a later claim()'s RMW.  The item stays
  /// queued, so nothing is lost: whoever claims next drains it.
  /// Errors: none.
  /// Source: cuda-python PR #2371 (on -1, scheduled_ returns to false).
  void unclaim() noexcept {
    // Read by the next producer's claim() RMW.
    scheduled_.store(false, std::memory_order_release);
  }

  // [doc:queue-clear]
  /// Clear scheduled_ in the drain.
  ///
  /// Thread: consumer (main thread), in the pending call.  Never blocks.
  /// Memory ordering: P::clear.  In the reference (seq_cst, before the take)
  /// it comes before the following take_all() in S: with release only, the
  /// store may sit in a store buffer while the take reads an old head_, and
  /// a producer may read the old `true`: the lost wakeup.
  /// Errors: none.
  /// Source: cuda-python PR #2371 (the drain clears the flag).
  void clear() noexcept {
    // Pairs with producers' check_scheduled()/claim() (wakeup.clear).
    scheduled_.store(false, P::clear);
  }
  // [end-doc:queue-clear]

  /// Whether a pending call looked claimed.  Snapshot only.
  ///
  /// Thread: any.  Memory ordering: relaxed.  Errors: none.
  /// Source: this project.
  /// @return scheduled_ at some instant
  bool scheduled_snapshot() const noexcept {
    // Snapshot only.
    return scheduled_.load(std::memory_order_relaxed);
  }

  // [doc:gate]
  /// Enter the in-flight gate (reference): announce this producer, then check
  /// that the host still accepts pending calls.  On false the producer has
  /// already left the gate and must not call the host.
  ///
  /// Thread: any producer.  Never blocks.
  /// Memory ordering: the increment (P::gate_enter) and the check
  /// (P::gate_check) are seq_cst.  They form a store-buffering pair with
  /// shutdown's close() then in_flight(): in S either shutdown's read sees
  /// our increment (and waits for our gate_leave()), or our check sees
  /// accepting_ == false (and we do not call the host).
  /// Errors: none.
  /// Source: this project (docs/design/shutdown).
  /// @return true if the producer is inside the gate and may call the host
  bool gate_enter() noexcept {
    static_assert(P::gate, "only the reference and cuda-core-1.2-fixed have an in-flight gate");
    // Announces us to shutdown's in_flight() read (gate.enter).
    in_flight_.fetch_add(1, P::gate_enter);
    if (accepting()) {
      return true;
    }
    gate_leave();
    return false;
  }

  /// Leave the in-flight gate after the host call returned.
  ///
  /// Thread: the producer that entered.  Never blocks.
  /// Memory ordering: release: synchronizes with shutdown's in_flight() load
  /// that reads the decremented value, so the host call happens-before
  /// shutdown proceeds.
  /// Errors: none.
  /// Source: this project (docs/design/shutdown).
  void gate_leave() noexcept {
    // Read by shutdown's in_flight() wait loop (litmus-mp: gate.leave).
    in_flight_.fetch_sub(1, std::memory_order_release);
  }

  /// Whether the host still accepts pending calls from producers.
  ///
  /// Thread: any.  Never blocks.
  /// Memory ordering: P::gate_check: seq_cst inside the reference's gate
  /// (see gate_enter); acquire in the comparison variants, pairing with
  /// close()'s release.
  /// Errors: none.
  /// Source: cuda-python PR #2371 (accepting_).
  /// @return accepting_ as read
  bool accepting() const noexcept {
    // Pairs with close() (gate.check).
    return accepting_.load(P::gate_check);
  }

  /// Stop accepting: from now on producers still push but never call the
  /// host.
  ///
  /// Thread: the shutdown path (the exit hook on the main thread, the
  /// backstop, or a comparison variant's producer that saw finalization).
  /// Never blocks.
  /// Memory ordering: P::gate_close (seq_cst in the reference, release in the
  /// comparison variants); see gate_enter().
  /// Errors: none.
  /// Source: cuda-python PR #2371 (stop()).
  void close() noexcept {
    // Pairs with producers' accepting() (gate.close).
    accepting_.store(false, P::gate_close);
  }
  // [end-doc:gate]

  /// Number of producers inside the gate, as read by the shutdown wait loop;
  /// always 0 for a policy without a gate.
  ///
  /// Thread: the shutdown path.  Never blocks.
  /// Memory ordering: P::gate_wait (seq_cst): synchronizes with each
  /// gate_leave() it observes, and with close() forms the gate's
  /// store-buffering pair.
  /// Errors: none.
  /// Source: this project (docs/design/shutdown).
  /// @return producers between gate_enter() and gate_leave()
  std::uint32_t in_flight() const noexcept {
    if constexpr (!P::gate) {
      return 0;  // no gate: nothing to wait out (shutdown.hpp, wait_gate)
    } else {
      // Synchronizes with gate_leave()'s release (gate.wait; litmus-mp).
      return in_flight_.load(P::gate_wait);
    }
  }

  /// Whether the host may still run cleanups.
  ///
  /// Thread: any; the drain checks it on the main thread.
  /// Memory ordering: acquire: pairs with mark_host_dead()'s release.
  /// Errors: none.
  /// Source: this project.
  /// @return false once mark_host_dead() ran
  bool host_alive() const noexcept {
    // Pairs with mark_host_dead().
    return alive_.load(std::memory_order_acquire);
  }

  /// Forbid any further cleanup: pending calls and entry points become no-ops
  /// and queued items are leaked.
  ///
  /// Thread: the shutdown path.  Never blocks.
  /// Memory ordering: release, read by host_alive().
  /// Errors: none.
  /// Source: this project.
  void mark_host_dead() noexcept {
    // Read by host_alive().
    alive_.store(false, std::memory_order_release);
  }

  /// Re-entrancy flag of the drain.  A cleanup can run Python code that
  /// calls an entry point, which tries to drain again (CPython never nests
  /// pending calls: drain.hpp); drain_all() sees the flag and returns at once,
  /// and the outer loop takes the new items.
  ///
  /// Thread: main thread only.  Memory ordering: plain (one thread).
  /// Errors: none.
  /// Source: this project.
  /// @return true while a drain runs on the main thread
  bool draining() const noexcept { return draining_; }

  /// Set or clear the re-entrancy flag (see draining()).
  ///
  /// Thread: main thread only.  Memory ordering: plain.  Errors: none.
  /// Source: this project.
  /// @param on new value
  void set_draining(bool on) noexcept { draining_ = on; }

  /// Make the queue consistent in a child process after fork().
  ///
  /// Only the forking thread exists in the child: no producer is inside the
  /// gate, no drain runs unless the fork was made by the drain's own thread
  /// (a cleanup that called os.fork()), and whether CPython carries our
  /// pending call into the child is not ours to know.  So: in_flight_ = 0,
  /// scheduled_ = false, no call outstanding; the drain flag is kept only
  /// when the fork came from the thread that was draining.  Queued items are
  /// the child's own copies and stay queued for the child's next drain.
  ///
  /// Thread: the forking thread, in the child, before any other thread
  /// exists (os.register_at_fork after_in_child).  Never blocks.
  /// Memory ordering: relaxed stores: the child has one thread.
  /// Errors: none.
  /// Source: CPython Doc/library/os.rst (register_at_fork); POSIX fork(2)
  /// (only the calling thread is duplicated).
  /// @param forked_by_drain_thread whether the forking thread was the
  ///        thread running the drain (the main thread inside a cleanup)
  void reset_after_fork(bool forked_by_drain_thread) noexcept {
    // One thread in the child: no ordering needed.
    in_flight_.store(0, std::memory_order_relaxed);
    // One thread in the child.
    scheduled_.store(false, std::memory_order_relaxed);
    rearm.reset_after_fork();  // re-arming: no record or stale clock survives in the child
    draining_ = draining_ && forked_by_drain_thread;
    stats.forks.fetch_add(1, std::memory_order_relaxed);  // statistics only
  }

  /// Count the queued items without taking them (the backstop, after
  /// teardown).  Walks a snapshot of the list: pushes only prepend, and no
  /// drain frees nodes any more.
  ///
  /// Thread: the backstop (main thread), after the host is dead.
  /// Memory ordering: acquire load of head_: synchronizes with the push CAS
  /// it reads, so every `next` on the walked list is visible.
  /// Errors: none.
  /// Source: this project.
  /// @return the number of items on the list
  std::uint64_t count_queued() const noexcept {
    std::uint64_t n = 0;
    // Synchronizes with the push CAS it reads.
    for (auto* it = head_.load(std::memory_order_acquire); it != nullptr; it = it->next) ++n;
    return n;
  }

  /// Statistics counters (relaxed; snapshot only; host.hpp).
  Stats stats;
  /// The host's settings (configure(); relaxed; host.hpp).
  Settings settings;
  /// The re-arm rule's state (reference; rearm_state.hpp): the tokens name
  /// this queue.
  RearmState<P> rearm{this};

 private:
  const Host* const host_;
  /// List of pushed items, newest first.  Written by push CASes, emptied by
  /// take_all's exchange.
  alignas(DC_QUEUE_FIELD_ALIGN) std::atomic<DeferredCleanupItem*> head_{nullptr};
  /// A pending call is claimed.  Set by claim(), cleared by the drain.
  alignas(DC_QUEUE_FIELD_ALIGN) std::atomic<bool> scheduled_{false};
  /// Producers may call the host.  Cleared once by shutdown.
  std::atomic<bool> accepting_{true};
  /// Producers inside the gate (reference only).
  alignas(DC_QUEUE_FIELD_ALIGN) std::atomic<std::uint32_t> in_flight_{0};
  /// The host may run cleanups.  Cleared once by shutdown.
  std::atomic<bool> alive_{true};
  /// A drain runs on the main thread (re-entrancy guard).
  bool draining_ = false;
};

/// The queue to use: the reference policy.  An extension names this type and
/// nothing else from policy.hpp; the comparison policies are in
/// deferred_cleanup/comparison/policies.hpp, out of the way.
///
/// Thread: see BasicQueue.  Memory ordering: ReferencePolicy's constants.
/// Errors: none.  Source: policy.hpp.
using Queue = BasicQueue<ReferencePolicy>;
/// The queue of the reference variant (the same type as Queue; the name the
/// variant matrix uses beside comparison::SeedQueue and
/// comparison::CudaCore12Queue).
///
/// Thread: see BasicQueue.  Memory ordering: ReferencePolicy's constants.
/// Errors: none.  Source: policy.hpp.
using ReferenceQueue = Queue;

}  // namespace deferred_cleanup
