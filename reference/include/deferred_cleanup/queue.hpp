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
//                       (two or three after re-arms, scheduling.hpp);
//   accepting_          false once shutdown closed the door: producers still
//                       push but no longer call into the host;
//   in_flight_          producers between their `accepting_` check and the end
//                       of their host call (the in-flight gate, shutdown.hpp);
//   alive_              false once the host may no longer run cleanups;
//   claim_seq_,         the sequence number of the current claim's pending
//   superseded_seq_,    call, of the older one a re-arm superseded that may
//   main_seq_           still run, and of the main thread's call past that
//                       bound (at most three calls outstanding);
//   claimed_at_ns_      when the outstanding claim was made (host clock), for
//                       re-arming a claim whose pending call never runs.
//
// Store buffering (the lost wakeup).  A producer does  push(head_) ; read
// scheduled_.  The reference's drain does  clear(scheduled_) ; read head_.
// Under acquire/release both reads may miss the other side's write (the
// classic SB shape): the producer sees "already scheduled" and makes no
// pending call, the drain sees an empty list and returns, and the item waits
// for the next unrelated wakeup: a lost wakeup.  seq_cst on all four
// operations puts them in one total order S, and whichever write comes first
// in S is seen by the other side's read.  The in-flight gate has the same
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

namespace deferred_cleanup {

template <class P>
class BasicQueue;

/// The argument of one pending call of the reference: the queue and the
/// call's sequence number, so the call knows whether it is the current
/// claim's call or one that a re-arm superseded.
///
/// Thread: `seq` written by the adding producer before add_pending_call,
/// read by the pending call on the main thread; `queue` written once by the
/// queue's constructor.
/// Memory ordering: `seq` is relaxed; the host's add_pending_call /
/// pending-call hand-off (CPython's pending-call lock) orders the write
/// before the call reads it.
/// Errors: none.
/// Source: this project (docs/design/scheduling, "Re-arming").
template <class P>
struct CallToken {
  BasicQueue<P>* queue = nullptr;     ///< the queue to drain (set by its constructor)
  std::atomic<std::uint64_t> seq{0};  ///< the call's sequence number (>= 1)
};

// [doc:queue]
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
/// it synchronizes with; the essay above gives the two handshakes.
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
  explicit BasicQueue(const Host* host) noexcept : host_(host) {
    for (CallToken& t : tokens_) t.queue = this;  // written once, before publication
  }

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
  /// Source: cuda-python PR #2371 (at most one outstanding pending call).
  /// @return true if this call changed scheduled_ from false to true
  bool claim() noexcept {
    if constexpr (P::variant == Variant::reference) {
      // RMW, reads the drain's clear or a later claim (wakeup.claim).
      return !scheduled_.exchange(true, P::claim);
    } else {
      bool expected = false;
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
    static_assert(P::gate, "only the reference has an in-flight gate");
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

  /// Number of producers inside the gate, as read by the shutdown wait loop.
  ///
  /// Thread: the shutdown path.  Never blocks.
  /// Memory ordering: P::gate_wait (seq_cst): synchronizes with each
  /// gate_leave() it observes, and with close() forms the gate's
  /// store-buffering pair.
  /// Errors: none.
  /// Source: this project (docs/design/shutdown).
  /// @return producers between gate_enter() and gate_leave()
  std::uint32_t in_flight() const noexcept {
    static_assert(P::gate, "only the reference has an in-flight gate");
    // Synchronizes with gate_leave()'s release (gate.wait; litmus-mp).
    return in_flight_.load(P::gate_wait);
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

  /// The argument of one pending call of the reference (see CallToken).
  using CallToken = deferred_cleanup::CallToken<P>;

  /// Take a token for a new pending call: the next sequence number, in one
  /// of 64 slots.  A slot is reused 64 tokens later; a running call reads its
  /// number first thing, and at most three of the queue's calls are
  /// outstanding, so only a call lost by the host (which never reads it) can
  /// see its slot reused.
  ///
  /// Thread: the producer that claimed (or re-armed).  Never blocks.
  /// Memory ordering: relaxed RMW for the number, relaxed store into the slot.
  /// Errors: none.
  /// Source: this project.
  /// @return the token to pass as the pending call's argument
  CallToken* new_call_token() noexcept {
    // Sequence numbers only; orders nothing.
    const std::uint64_t seq = next_seq_.fetch_add(1, std::memory_order_relaxed) + 1;
    CallToken& t = tokens_[seq % kTokens];
    // Published to the pending call by the host's hand-off.
    t.seq.store(seq, std::memory_order_relaxed);
    return &t;
  }

  /// Make `seq` the current claim's call.
  ///
  /// Thread: the claimant or the re-armer.  Memory ordering: relaxed (see
  /// the re-arm essay in scheduling.hpp: a stale view only makes an old call
  /// skip its clear, which the current call does).  Errors: none.
  /// Source: this project.
  /// @param seq the sequence number of the claim's call
  void set_claim_seq(std::uint64_t seq) noexcept {
    // Heuristic for which call clears; see above.
    claim_seq_.store(seq, std::memory_order_relaxed);
  }

  /// Move the claim from call `expected` to call `desired` in one RMW: a
  /// re-arm hands the claim to its new call, the claim's call takes it back
  /// to 0 when it runs.  Exactly one of a running call and a concurrent
  /// re-arm wins, so a call that clears scheduled_ never races a re-arm into
  /// leaving a third call behind.
  ///
  /// Thread: the re-armer, or the main thread in the pending call.
  /// Memory ordering: acq_rel CAS, acquire on failure.  A re-armer records
  /// the call it supersedes (take_supersede(), take_main_rearm()) before it
  /// moves the claim; a running call that finds the claim moved (its CAS
  /// fails, reading the re-armer's value) therefore sees that record in its
  /// next load (call_ran()).  The clear of scheduled_ that follows a won
  /// move is seq_cst.
  /// Errors: none.
  /// Source: this project; the race is the model's trail "a re-arm overtakes
  /// the claim's call while it runs" (tests/model/deferred_cleanup.pml).
  /// @param expected the claim's call the caller saw
  /// @param desired the new claim's call, or 0 for none
  /// @return true if the claim moved
  bool move_claim_seq(std::uint64_t expected, std::uint64_t desired) noexcept {
    // release: publishes the caller's record; acquire: sees the winner's.
    return claim_seq_.compare_exchange_strong(expected, desired, std::memory_order_acq_rel,
                                              std::memory_order_acquire);
  }

  /// The sequence number of the current claim's call.
  ///
  /// Thread: any.  Memory ordering: relaxed.  Errors: none.
  /// Source: this project.
  /// @return the sequence number, 0 before any claim
  std::uint64_t claim_seq() const noexcept {
    // Heuristic; see set_claim_seq().
    return claim_seq_.load(std::memory_order_relaxed);
  }

  /// Take the right to supersede the current claim's call, whose sequence
  /// number is `old_seq`: superseded_seq_ 0 -> old_seq.  At most one
  /// superseded call may be outstanding besides the claim's call, so without
  /// the main thread's call (take_main_rearm()) at most two of the queue's
  /// calls are outstanding.
  ///
  /// Thread: a producer or the main thread that found a stale claim.
  /// Memory ordering: relaxed CAS (the number orders nothing).
  /// Errors: none.
  /// Source: this project.
  /// @param old_seq the sequence number of the call being superseded
  /// @return true if this caller may add one more pending call
  bool take_supersede(std::uint64_t old_seq) noexcept {
    std::uint64_t none = 0;
    // Bounds superseded calls at one; orders nothing.
    return superseded_seq_.compare_exchange_strong(none, old_seq == 0 ? 1 : old_seq,
                                                   std::memory_order_relaxed);
  }

  /// Give the right back after the superseding call was refused.
  ///
  /// Thread: the re-armer.  Memory ordering: relaxed.  Errors: none.
  /// Source: this project.
  void release_supersede() noexcept {
    // Only the re-armer that took it gives it back.
    superseded_seq_.store(0, std::memory_order_relaxed);
  }

  /// Superseded calls possibly still outstanding (0 or 1).
  ///
  /// Thread: any.  Memory ordering: relaxed.  Errors: none.
  /// Source: this project.
  /// @return the count at some instant
  std::uint32_t superseded() const noexcept {
    // Snapshot only.
    return superseded_seq_.load(std::memory_order_relaxed) != 0 ? 1u : 0u;
  }

  /// Take the main thread's right to re-arm past the bound for its call
  /// numbered `seq`: main_seq_ 0 -> seq.  At most one such call is
  /// outstanding; it is cleared, like the superseded record, when it or any
  /// newer call runs (call_ran()).  With the claim's call and one superseded
  /// call, at most three of the queue's calls are ever outstanding.
  ///
  /// Thread: the main thread at an entry point (scheduling.hpp,
  /// rearm_if_stale).  Never blocks.
  /// Memory ordering: relaxed CAS (mutual exclusion on one location; the
  /// number orders nothing).
  /// Errors: none.
  /// Source: this project.
  /// @param seq the sequence number of the main thread's new call (>= 1)
  /// @return true if the caller may add that call
  bool take_main_rearm(std::uint64_t seq) noexcept {
    std::uint64_t none = 0;
    // Bounds the main thread's calls at one; orders nothing.
    return main_seq_.compare_exchange_strong(none, seq, std::memory_order_relaxed);
  }

  /// Give the main thread's right back after its call was not added.
  ///
  /// Thread: the main thread that took it.  Never blocks.
  /// Memory ordering: relaxed CAS: clears only `seq`, never a newer record.
  /// Errors: none.
  /// Source: this project.
  /// @param seq the number given to take_main_rearm()
  void release_main_rearm(std::uint64_t seq) noexcept {
    // Only the number this caller recorded; orders nothing.
    main_seq_.compare_exchange_strong(seq, 0, std::memory_order_relaxed);
  }

  /// Whether the main thread's call past the bound may be outstanding (0 or 1).
  ///
  /// Thread: any.  Memory ordering: relaxed.  Errors: none.
  /// Source: this project.
  /// @return the count at some instant
  std::uint32_t main_rearmed() const noexcept {
    // Snapshot only.
    return main_seq_.load(std::memory_order_relaxed) != 0 ? 1u : 0u;
  }

  /// A pending call with sequence number `seq` runs: account for it.
  /// CPython runs the pending calls of one ring first in, first out, so when
  /// the superseded call or any newer one runs, the superseded call has run
  /// or was lost: the right to supersede is free again.  The same holds for
  /// the main thread's call (main_seq_).  Only the recorded number is cleared
  /// (a CAS), never one a concurrent re-arm has just taken.
  ///
  /// The claim is taken back before the records are read.  Read the
  /// other way round, a re-arm could record this very call as superseded and
  /// move the claim after the record was read but before the claim move:
  /// this call would then drain as a superseded call and leave its own
  /// number recorded, and with the re-arm's call lost nothing newer would
  /// ever clear it (spin's trail, tests/model: liveness with one lost call).
  /// Claim first, either the claim move wins (the re-arm's move fails and it
  /// gives its record back) or the re-arm's move won, and then its record is
  /// visible here (move_claim_seq()) and cleared by the FIFO rule.
  ///
  /// Thread: main thread, in the pending call.  Never blocks.
  /// Memory ordering: the claim move is acq_rel/acquire (move_claim_seq());
  /// the records and ran_max_seq_ are relaxed (see take_supersede()).
  /// Errors: none.
  /// Source: Python/ceval_gil.c v3.12.0 (_push_pending_call and
  /// _pop_pending_call: a ring buffer, first in, first out).
  /// @param seq the running call's sequence number
  /// @return true if this is the current claim's call (it must clear
  ///         scheduled_); false for a superseded call (it only drains)
  bool call_ran(std::uint64_t seq) noexcept {
    std::uint64_t r = ran_max_seq_.load(std::memory_order_relaxed);  // heuristic
    // Highest number that ran; only the main thread writes it.  Before the
    // claim move, so a refused re-arm that moves the claim back afterwards
    // sees that this call ran (ran_at_least()) and gives the claim back.
    while (seq > r && !ran_max_seq_.compare_exchange_weak(r, seq, std::memory_order_relaxed)) {
    }
    // Then the claim, before the records: the claim's call takes it back.
    const bool claims = move_claim_seq(seq, 0);
    std::uint64_t s = superseded_seq_.load(std::memory_order_relaxed);  // heuristic
    if (s != 0 && seq >= s) {
      // FIFO: the superseded call is gone; clear only that number.
      superseded_seq_.compare_exchange_strong(s, 0, std::memory_order_relaxed);
    }
    std::uint64_t m = main_seq_.load(std::memory_order_relaxed);  // heuristic
    if (m != 0 && seq >= m) {
      // FIFO: the main thread's call is gone; clear only that number.
      main_seq_.compare_exchange_strong(m, 0, std::memory_order_relaxed);
    }
    return claims;
  }

  /// Whether a call numbered `seq` or higher has run (FIFO: then call `seq`
  /// has run or was lost).
  ///
  /// Thread: any.  Memory ordering: relaxed.  Errors: none.
  /// Source: this project.
  /// @param seq a call's sequence number
  /// @return true if the highest number that ran is at least `seq`
  bool ran_at_least(std::uint64_t seq) const noexcept {
    // Heuristic; see call_ran().
    return ran_max_seq_.load(std::memory_order_relaxed) >= seq;
  }

  /// Pending calls of the queue possibly outstanding, an upper bound: the
  /// current claim's call, if claimed, plus a superseded one, plus the main
  /// thread's call past the bound (which also stands for the claim's call
  /// that it superseded, unrecorded).  Snapshot (statistics, tests).
  ///
  /// Thread: any.  Memory ordering: relaxed.  Errors: none.
  /// Source: this project.
  /// @return 0, 1, 2 or 3
  std::uint32_t calls_outstanding() const noexcept {
    return (scheduled_snapshot() ? 1u : 0u) + superseded() + main_rearmed();
  }

  /// Record when the current claim was made (host clock, nanoseconds; 0 for
  /// none).
  ///
  /// Thread: the claimant, the re-armer or the drain.
  /// Memory ordering: relaxed: a heuristic for the re-arm rule; a stale or
  /// torn view can only make a re-arm early or late, never exceed three calls.
  /// Errors: none.
  /// Source: this project.
  /// @param ns host clock at the claim, or 0
  void set_claimed_at(std::int64_t ns) noexcept {
    // Heuristic only.
    claimed_at_ns_.store(ns, std::memory_order_relaxed);
  }

  /// When the current claim was made (0 for none).
  ///
  /// Thread: any.  Memory ordering: relaxed.  Errors: none.
  /// Source: this project.
  /// @return host clock in nanoseconds, or 0
  std::int64_t claimed_at() const noexcept {
    // Heuristic only.
    return claimed_at_ns_.load(std::memory_order_relaxed);
  }

  /// Start the claim's stale clock once its call was added: claim time
  /// 0 -> `now`, only while call `seq` is still the claim's call (a claim is
  /// never stale before its call is in the host's ring, so a re-arm can never
  /// overtake the call it supersedes and break the first-in, first-out order
  /// that call_ran() relies on).
  ///
  /// Thread: the claimant or the re-armer, after add_pending_call returned 0.
  /// Memory ordering: relaxed (a heuristic; a call that already ran took
  /// the claim back to 0, and re-arming needs a non-zero claim).
  /// Errors: none.
  /// Source: this project.
  /// @param seq the added call's number
  /// @param now the caller's clock
  void start_stale_clock(std::uint64_t seq, std::int64_t now) noexcept {
    if (claim_seq() != seq) return;  // it ran already, or a re-arm moved on
    std::int64_t zero = 0;
    // Heuristic only.
    claimed_at_ns_.compare_exchange_strong(zero, now, std::memory_order_relaxed);
  }

  /// Move the claim time from `seen` to 0, so that one re-armer wins per
  /// stale claim (the re-armer starts the clock again once its call was
  /// added).
  ///
  /// Thread: any.  Memory ordering: relaxed CAS.  Errors: none.
  /// Source: this project.
  /// @param seen the value read by claimed_at()
  /// @return true if this caller moved it
  bool take_stale_claim(std::int64_t seen) noexcept {
    // One winner per stale claim; orders nothing.
    return claimed_at_ns_.compare_exchange_strong(seen, 0, std::memory_order_relaxed);
  }

  /// Re-entrancy flag of the drain.  A cleanup can run Python code, which can
  /// run a pending call or an entry point that tries to drain again; the
  /// nested drain returns at once and the outer loop takes the new items.
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
    // One thread in the child.
    superseded_seq_.store(0, std::memory_order_relaxed);
    // One thread in the child.
    main_seq_.store(0, std::memory_order_relaxed);
    // One thread in the child.
    claimed_at_ns_.store(0, std::memory_order_relaxed);
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

 private:
  const Host* const host_;
  /// List of pushed items, newest first.  Written by push CASes, emptied by
  /// take_all's exchange.
  std::atomic<DeferredCleanupItem*> head_{nullptr};
  /// A pending call is claimed.  Set by claim(), cleared by the drain.
  std::atomic<bool> scheduled_{false};
  /// Producers may call the host.  Cleared once by shutdown.
  std::atomic<bool> accepting_{true};
  /// Producers inside the gate (reference only).
  std::atomic<std::uint32_t> in_flight_{0};
  /// The host may run cleanups.  Cleared once by shutdown.
  std::atomic<bool> alive_{true};
  /// Slots of the reference's call tokens (queue.hpp, CallToken).
  static constexpr std::size_t kTokens = 64;
  CallToken tokens_[kTokens];
  /// Sequence numbers of pending calls (reference).
  std::atomic<std::uint64_t> next_seq_{0};
  /// Highest sequence number of a call that ran (reference).
  std::atomic<std::uint64_t> ran_max_seq_{0};
  /// Sequence number of the current claim's call (reference).
  std::atomic<std::uint64_t> claim_seq_{0};
  /// Sequence number of the superseded call possibly outstanding, 0 for
  /// none (re-arm bound).
  std::atomic<std::uint64_t> superseded_seq_{0};
  /// Sequence number of the main thread's call past the re-arm bound possibly
  /// outstanding, 0 for none.
  std::atomic<std::uint64_t> main_seq_{0};
  /// Host clock at the current claim, 0 for none (re-arm heuristic).
  std::atomic<std::int64_t> claimed_at_ns_{0};
  /// A drain runs on the main thread (re-entrancy guard).
  bool draining_ = false;
};
// [end-doc:queue]

/// The queue of the reference variant.
///
/// Thread: see BasicQueue.  Memory ordering: ReferencePolicy's constants.
/// Errors: none.  Source: policy.hpp.
using ReferenceQueue = BasicQueue<ReferencePolicy>;
/// The queue of the seed variant (the cuda-python PR #2371 text).
///
/// Thread: see BasicQueue.  Memory ordering: SeedPolicy's constants.
/// Errors: none.  Source: policy.hpp.
using SeedQueue = BasicQueue<SeedPolicy>;
/// The queue of the cuda-core-1.2 variant (the cuda-core 1.2.0 wheel).
///
/// Thread: see BasicQueue.  Memory ordering: CudaCore12Policy's constants.
/// Errors: none.  Source: policy.hpp.
using CudaCore12Queue = BasicQueue<CudaCore12Policy>;

}  // namespace deferred_cleanup
