// queue.hpp: the process-wide intrusive MPSC queue and its three flags.
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
//   scheduled_   true while a pending call for the drain is outstanding, so
//                any number of producers cause at most one pending call;
//   accepting_   false once shutdown has begun: producers still push but no
//                longer call into the host;
//   in_flight_   number of producers between their `accepting_` check and
//                the end of their host call (the in-flight gate, shutdown.hpp);
//   alive_       false once the host may no longer run cleanups (after the
//                final drain, or at the backstop).
//
// Store buffering (the lost wakeup).  A producer does  push(head_) ; read
// scheduled_.  The drain does  clear(scheduled_) ; read head_.  Under
// acquire/release both reads may miss the other side's write (the classic SB
// shape): the producer sees "already scheduled" and makes no pending call,
// the drain sees an empty list and returns, and the item waits for the next
// unrelated wakeup: a lost wakeup.  seq_cst on all four operations puts them in
// one total order S, and whichever write comes first in S is seen by the
// other side's read.  The in-flight gate has the same shape (in_flight_++ ;
// read accepting_  vs  accepting_=false ; read in_flight_) and the same
// remedy.  The seed variant keeps acquire/release, as the seed design does
// (cuda-python PR #2371), so tests and the litmus files can compare the two.
//
// Each atomic operation that belongs to one of those pairs ends its source
// line with a `[litmus:NAME]` tag.  On that line the first std::memory_order
// token is the reference's order and the second the seed's; order() picks one
// at run time.  (A run-time order is legal C++; GCC then emits its strongest
// form, so the seed's weakness is shown by the litmus tests and the model,
// not by this build on x86.)
//
// The queue is published once, at module import, through an atomic pointer
// and never freed: a destructor callback that arrives arbitrarily late (after
// finalization) still finds valid memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "deferred_cleanup/item.hpp"

namespace deferred_cleanup {

struct Host;  // scheduling.hpp: how the queue reaches its host (CPython or a fake)

/// Which ordering and shutdown discipline a queue follows.
///
/// Thread: fixed at construction, read from any thread.
/// Memory ordering: immutable after construction.
/// Errors: none.
/// Source: cuda-python PR #2371 (seed); issue 3 Part 2 (reference).
enum class Variant : std::uint8_t {
  reference,  ///< seq_cst on the store-buffering pairs, atexit hook + gate + final drain, direct drain
  seed,       ///< acquire/release, Py_AtExit only, no gate wait, no final drain, no direct drain
};

/// Relaxed statistics counters.  Every counter is incremented with
/// std::memory_order_relaxed: they order nothing and are read as a snapshot.
///
/// Thread: any thread increments; any thread reads.
/// Memory ordering: relaxed; a snapshot may mix values from different moments.
/// Errors: none.
/// Source: this project (counters named in issue 3).
struct Stats {
  std::atomic<std::uint64_t> created{0};             ///< items allocated (user objects attempted)
  std::atomic<std::uint64_t> enqueued{0};            ///< items pushed by destructor callbacks
  std::atomic<std::uint64_t> enqueued_late{0};       ///< of those, pushed when no longer accepting
  std::atomic<std::uint64_t> cleaned{0};             ///< cleanups run (drains + direct cleanups)
  std::atomic<std::uint64_t> direct_cleanups{0};     ///< cleanups run because user-object creation failed
  std::atomic<std::uint64_t> schedule_attempts{0};   ///< host add_pending_call calls made
  std::atomic<std::uint64_t> schedule_failures{0};   ///< of those, refused (returned -1)
  std::atomic<std::uint64_t> pending_calls{0};       ///< of those, accepted (returned 0)
  std::atomic<std::uint64_t> drain_cycles{0};        ///< pending calls that ran a drain
  std::atomic<std::uint64_t> pending_calls_ignored{0};  ///< pending calls that ran after the host died
  std::atomic<std::uint64_t> direct_drains{0};       ///< drains run directly at an entry point
  std::atomic<std::uint64_t> retries{0};             ///< scheduling retries from entry points
  std::atomic<std::uint64_t> leaked_at_shutdown{0};  ///< items left in the queue at the backstop
  std::atomic<std::uint64_t> gate_timeouts{0};       ///< shutdown gave up waiting for the gate
  /// host add_pending_call calls made after mark_host_dead(): the hazard the
  /// in-flight gate closes.  Always 0 in the reference (shutdown waits for
  /// every producer inside the gate before marking the host dead) unless
  /// gate_timeouts is non-zero; the seed's held producer makes it 1.
  std::atomic<std::uint64_t> host_calls_after_teardown{0};
};

/// The process-wide MPSC queue plus its scheduling and shutdown flags.
///
/// Thread: push(), claim_schedule(), unclaim_schedule(), gate_enter() and
/// gate_leave() from any thread (producers); take_all(), clear_schedule() and
/// the drain flag from the consumer (main) thread only; close(), in_flight()
/// and mark_host_dead() from the shutdown path on the main thread or the
/// backstop.  Nothing blocks: every operation is one atomic instruction or a
/// CAS loop that retries only when another producer won.
/// Memory ordering: see each member and the essay above.
/// Errors: none; no operation can fail.
/// Source: cuda-python PR #2371 (queue shape); Treiber, "Systems Programming:
/// Coping with Parallelism" (IBM RJ 5118, 1986) for the CAS stack.
class Queue {
 public:
  /// Construct an idle queue: empty, not scheduled, accepting, host alive.
  ///
  /// Thread: any (the CPython host constructs it at module import, then
  /// publishes it with publish_queue()).  Never blocks.
  /// Memory ordering: plain initialisation; made visible to other threads by
  /// the release in publish_queue().
  /// Errors: none.
  /// Source: issue 3, "shutdown state is initialised explicitly at import".
  /// @param variant reference or seed discipline, fixed for the queue's life
  /// @param host the host the scheduling and drain functions call; must
  ///        outlive the queue (in practice: static storage)
  Queue(Variant variant, const Host* host) noexcept : variant_(variant), host_(host) {
    head_.store(nullptr, std::memory_order_relaxed);     // published by publish_queue's release CAS
    scheduled_.store(false, std::memory_order_relaxed);  // likewise
    accepting_.store(true, std::memory_order_relaxed);   // likewise
    in_flight_.store(0, std::memory_order_relaxed);      // likewise
    alive_.store(true, std::memory_order_relaxed);       // likewise
  }

  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  /// The discipline chosen at construction.
  ///
  /// Thread: any.  Memory ordering: immutable.  Errors: none.
  /// Source: issue 3 (seed variant switch).
  /// @return the queue's variant
  Variant variant() const noexcept { return variant_; }

  /// The host given at construction.
  ///
  /// Thread: any.  Memory ordering: immutable.  Errors: none.
  /// Source: scheduling.hpp (host interface).
  /// @return the host; valid for the queue's life
  const Host& host() const noexcept { return *host_; }

  /// Pick the memory order of the current variant.
  ///
  /// Thread: any.  Memory ordering: none of its own.  Errors: none.
  /// Source: issue 3 Part 2a.
  /// @param reference the order the reference uses
  /// @param seed the order the seed variant uses
  /// @return `reference` for Variant::reference, `seed` for Variant::seed
  std::memory_order order(std::memory_order reference, std::memory_order seed) const noexcept {
    return variant_ == Variant::seed ? seed : reference;
  }

  // [doc:queue-push]
  /// Push one item (producer side).
  ///
  /// Thread: any thread, typically a driver thread with no Python thread
  /// state.  Lock-free: the CAS loop only repeats when another producer or
  /// the consumer changed `head_` in between.  Never allocates.
  /// Memory ordering: the successful CAS is release (seed) or seq_cst
  /// (reference).  Release publishes the item's fields to the consumer's
  /// take_all(); seq_cst additionally puts the push in the total order with
  /// the producer's later claim_schedule() and the drain's clear_schedule()
  /// / take_all(), which forbids the store-buffering lost wakeup.
  /// Errors: none.
  /// Source: cuda-python PR #2371; Treiber stack; folly's UMPSCQueue reports
  /// the empty->non-empty transition the same way.
  /// @param item item to push; must not be in any list
  /// @return true when the list was empty before this push (the transition a
  ///         producer may use to decide that it must wake the consumer)
  bool push(DeferredCleanupItem* item) noexcept {
    // Relaxed first read: only a guess for the CAS; the CAS validates it.
    DeferredCleanupItem* expected = head_.load(std::memory_order_relaxed);
    do {
      item->next = expected;  // plain store, published by the CAS below
      // Serialization point with the consumer's exchange in take_all(): release publishes item->next and the payload; seq_cst also orders it before our claim_schedule() against the drain's clear_schedule() (store buffering).
    } while (!head_.compare_exchange_weak(expected, item, order(std::memory_order_seq_cst, std::memory_order_release), std::memory_order_relaxed));  // [litmus:wakeup.push]
    return expected == nullptr;
  }
  // [end-doc:queue-push]

  // [doc:queue-take]
  /// Take every queued item at once and return them oldest first.
  ///
  /// Thread: the consumer (main thread) only.  Never blocks; O(n) to reverse.
  /// Memory ordering: the exchange is acquire (seed) or seq_cst (reference).
  /// Acquire synchronizes with every push CAS it reads (release sequence of
  /// CAS operations on head_), so all item fields are visible.  seq_cst also
  /// orders it after the drain's clear_schedule(): with the producer's
  /// push/claim pair that forbids the lost wakeup.
  /// Errors: none.
  /// Source: cuda-python PR #2371 (the drain takes the whole list with
  /// head_.exchange(nullptr)).
  /// @return the taken items in FIFO order linked through `next`, or nullptr
  DeferredCleanupItem* take_all() noexcept {
    // Synchronizes with every producer's push CAS (release sequence on head_); seq_cst in the reference so it cannot be ordered before the drain's clear_schedule() (store buffering).
    DeferredCleanupItem* lifo = head_.exchange(nullptr, order(std::memory_order_seq_cst, std::memory_order_acquire));  // [litmus:wakeup.take]
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

  /// Whether the queue looked empty at some instant.  Snapshot only: the
  /// answer may be stale before the caller reads it; use it for statistics
  /// and to skip needless work, never for a correctness decision that a
  /// later take_all() does not re-check.
  ///
  /// Thread: any.  Never blocks.
  /// Memory ordering: relaxed load; synchronizes with nothing.
  /// Errors: none.
  /// Source: this project.
  /// @return true if head_ was null when read
  bool empty_snapshot() const noexcept {
    return head_.load(std::memory_order_relaxed) == nullptr;  // snapshot only; no ordering needed
  }

  /// Try to become the one producer that schedules the drain: scheduled_
  /// false -> true in one atomic exchange.
  ///
  /// Thread: any.  Never blocks.
  /// Memory ordering: acq_rel (seed) or seq_cst (reference).  It reads the
  /// value written by the drain's clear_schedule(); seq_cst keeps it after
  /// this producer's push in the single total order, so either it sees the
  /// clear (and schedules) or the drain's take_all() sees the push.
  /// Errors: none.
  /// Source: cuda-python PR #2371 (at most one outstanding pending call).
  /// @return true if this call changed scheduled_ from false to true
  bool claim_schedule() noexcept {
    // Pairs with the drain's clear_schedule() (store buffering with our earlier push); the exchange always reads the latest value in scheduled_'s modification order.
    return !scheduled_.exchange(true, order(std::memory_order_seq_cst, std::memory_order_acq_rel));  // [litmus:wakeup.check]
  }

  /// Give the claim back after the host refused the pending call, so the next
  /// enqueue or entry point retries.
  ///
  /// Thread: the producer that holds the claim.  Never blocks.
  /// Memory ordering: release; a later claim_schedule() (acquire or stronger)
  /// sees it.  The item stays queued, so no lost wakeup: whoever claims next
  /// makes the pending call that drains it.
  /// Errors: none.
  /// Source: issue 3 Part 1.4 (on -1, scheduled_ returns to false).
  void unclaim_schedule() noexcept {
    scheduled_.store(false, std::memory_order_release);  // read by the next producer's claim_schedule() exchange
  }

  // [doc:queue-clear]
  /// Clear scheduled_ at the start of a pending-call drain, before taking the
  /// list.
  ///
  /// Thread: consumer (main thread), in the pending call.  Never blocks.
  /// Memory ordering: release (seed) or seq_cst (reference).  It must come
  /// before the following take_all() in the total order; with release only,
  /// the store may sit in a store buffer while take_all() reads an old head_,
  /// and a producer may read the old `true`: the lost wakeup.
  /// Errors: none.
  /// Source: cuda-python PR #2371 (drain clears the flag, then drains).
  void clear_schedule() noexcept {
    // Pairs with producers' claim_schedule(); seq_cst orders it before our take_all() against their push (store buffering).
    scheduled_.store(false, order(std::memory_order_seq_cst, std::memory_order_release));  // [litmus:wakeup.clear]
  }
  // [end-doc:queue-clear]

  /// Whether a pending call looked outstanding.  Snapshot only (statistics
  /// and tests).
  ///
  /// Thread: any.  Memory ordering: relaxed.  Errors: none.
  /// Source: this project.
  /// @return scheduled_ at some instant
  bool scheduled_snapshot() const noexcept {
    return scheduled_.load(std::memory_order_relaxed);  // snapshot only
  }

  // [doc:gate]
  /// Enter the in-flight gate: announce this producer, then check that the
  /// host still accepts pending calls.  On false the producer has already
  /// left the gate and must not call the host.
  ///
  /// Thread: any producer.  Never blocks.
  /// Memory ordering: the increment and the check are seq_cst in the
  /// reference (relaxed / acquire in the seed).  They form a store-buffering
  /// pair with shutdown's close() then in_flight(): in the total order either
  /// shutdown's read sees our increment (and waits for our gate_leave()), or
  /// our check sees accepting_ == false (and we do not call the host).
  /// Errors: none.
  /// Source: issue 3 Part 2b (in-flight gate).
  /// @return true if the producer is inside the gate and may call the host
  bool gate_enter() noexcept {
    // Announces us to shutdown's in_flight() read; seq_cst so it is ordered before our accepting_ check against shutdown's close (store buffering).
    in_flight_.fetch_add(1, order(std::memory_order_seq_cst, std::memory_order_relaxed));  // [litmus:gate.enter]
    // Pairs with shutdown's close(); seq_cst: see gate.enter.
    if (accepting_.load(order(std::memory_order_seq_cst, std::memory_order_acquire))) {  // [litmus:gate.check]
      return true;
    }
    gate_leave();
    return false;
  }

  /// Leave the in-flight gate after the host call returned.
  ///
  /// Thread: the producer that entered.  Never blocks.
  /// Memory ordering: release: synchronizes with shutdown's in_flight() load
  /// (acquire or stronger) that reads the decremented value, so the host
  /// call happens-before shutdown proceeds.
  /// Errors: none.
  /// Source: issue 3 Part 2b.
  void gate_leave() noexcept {
    in_flight_.fetch_sub(1, std::memory_order_release);  // read by shutdown's in_flight() wait loop
  }

  /// Stop accepting: from now on producers still push but never call the
  /// host.
  ///
  /// Thread: the shutdown path (main thread in the atexit hook, or the
  /// backstop).  Never blocks.
  /// Memory ordering: seq_cst (reference) / release (seed); see gate_enter().
  /// Errors: none.
  /// Source: issue 3 Part 2b.
  void close() noexcept {
    // Pairs with producers' gate_enter() check; seq_cst orders it before our in_flight() read (store buffering).
    accepting_.store(false, order(std::memory_order_seq_cst, std::memory_order_release));  // [litmus:gate.close]
  }
  // [end-doc:gate]

  /// Number of producers inside the gate, as read by the shutdown wait loop.
  ///
  /// Thread: the shutdown path.  Never blocks.
  /// Memory ordering: seq_cst (reference) / acquire (seed): synchronizes with
  /// each gate_leave() it observes, and with close() forms the gate's
  /// store-buffering pair.
  /// Errors: none.
  /// Source: issue 3 Part 2b.
  /// @return producers between gate_enter() and gate_leave()
  std::uint32_t in_flight() const noexcept {
    // Synchronizes with gate_leave()'s release; seq_cst so it is ordered after close() against gate_enter() (store buffering).
    return in_flight_.load(order(std::memory_order_seq_cst, std::memory_order_acquire));  // [litmus:gate.wait]
  }

  /// Whether the queue still accepted at some instant.  Snapshot only.
  ///
  /// Thread: any.  Memory ordering: relaxed.  Errors: none.
  /// Source: this project.
  /// @return accepting_ at some instant
  bool accepting_snapshot() const noexcept {
    return accepting_.load(std::memory_order_relaxed);  // snapshot only
  }

  /// Whether the host may still run cleanups.
  ///
  /// Thread: any; the drain checks it on the main thread.
  /// Memory ordering: acquire: pairs with mark_host_dead()'s release.  On the
  /// main thread both sides run on the same thread, so program order decides.
  /// Errors: none.
  /// Source: issue 3 Part 2b.
  /// @return false once mark_host_dead() ran
  bool host_alive() const noexcept {
    return alive_.load(std::memory_order_acquire);  // pairs with mark_host_dead()
  }

  /// Forbid any further cleanup: pending calls and entry points become no-ops
  /// and queued items are leaked.
  ///
  /// Thread: the shutdown path.  Never blocks.
  /// Memory ordering: release, read by host_alive().
  /// Errors: none.
  /// Source: issue 3 Part 2b.
  void mark_host_dead() noexcept {
    alive_.store(false, std::memory_order_release);  // read by host_alive()
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

  /// Statistics counters (relaxed; snapshot only).
  Stats stats;

 private:
  const Variant variant_;
  const Host* const host_;
  std::atomic<DeferredCleanupItem*> head_;
  std::atomic<bool> scheduled_;
  std::atomic<bool> accepting_;
  std::atomic<std::uint32_t> in_flight_;
  std::atomic<bool> alive_;
  bool draining_ = false;
};

/// The process-wide queue slot.  Published once, never freed.
///
/// Thread: any.  Never blocks.  Memory ordering: written by publish_queue() (release CAS),
/// read by published_queue() (acquire).
/// Errors: none.  Source: issue 3 Part 1.2.
inline std::atomic<Queue*> g_published_queue{nullptr};

/// Publish the process-wide queue, once.
///
/// Thread: any (the CPython host calls it at module import).  Never blocks.
/// Memory ordering: the successful CAS is acq_rel: release publishes the
/// queue's initialisation to every published_queue() reader; acquire on
/// failure makes the winner's queue fully visible to a losing caller.
/// Errors: none; a losing caller gets the winner and should discard (or leak)
/// its candidate.
/// Source: issue 3 Part 1.2 ("published once, atomically, at module import").
/// @param candidate a freshly constructed queue that is never freed
/// @return the published queue (candidate if this call won)
inline Queue* publish_queue(Queue* candidate) noexcept {
  Queue* expected = nullptr;
  // Release: synchronizes with published_queue()'s acquire load; acquire on failure to see the winner's fields.
  if (g_published_queue.compare_exchange_strong(expected, candidate, std::memory_order_acq_rel, std::memory_order_acquire)) {
    return candidate;
  }
  return expected;
}

/// The published queue, or nullptr before publication.
///
/// Thread: any, including driver threads.  Never blocks.
/// Memory ordering: acquire; pairs with publish_queue()'s release CAS.
/// Errors: none.
/// Source: issue 3 Part 1.2.
/// @return the queue, or nullptr if none was published yet
inline Queue* published_queue() noexcept {
  return g_published_queue.load(std::memory_order_acquire);  // pairs with publish_queue()
}

}  // namespace deferred_cleanup
