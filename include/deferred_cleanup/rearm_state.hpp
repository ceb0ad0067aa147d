// SPDX-License-Identifier: Apache-2.0
// rearm_state.hpp: the re-arm rule's state, in its own struct (reference).
//
// The PR's design needs one flag, `scheduled_` (queue.hpp): a claim is
// outstanding until its pending call runs.  Re-arming (rearm.hpp) covers a
// pending call that CPython accepted and then lost, and needs to know more
// about each claim; all of it is here, so that the queue, the callback, the
// scheduling and the drain read without it:
//
//   tokens_, next_seq_  each pending call of the reference carries a call
//                       token: the queue and a sequence number, in a ring of
//                       kCallTokens slots;
//   claim_seq_          the number of the current claim's call (0: none);
//   ran_max_seq_        the highest number that ran;
//   superseded_seq_     the number of the one older call a re-arm superseded
//                       that may still run (0: none);
//   main_seq_           the number of the main thread's call past that bound
//                       (0: none);
//   claimed_at_ns_      the claim's stale clock: 0 (no clock: no claim, or
//                       its call not yet in the host's ring), kClaimUntimed
//                       (the call was added, nobody has looked since), or
//                       the host clock when a re-arm check first saw the
//                       call outstanding (or when a re-armer added it).
//
// The core enters this state only through named hooks, each at one call site
// that says what it is for:
//
//   BasicQueue()            RearmState(this): the tokens name their queue;
//   schedule()              token_for_claim(), then call_added(): the claim's
//                           call gets a numbered token and, once it is in the
//                           host's ring, is marked added but untimed (no clock
//                           read on the claimant's path);
//   pending_call()          call_ran(), then stop_stale_clock(): is this the
//                           claim's call (it clears scheduled_) or one a
//                           re-arm superseded (it only drains)?
//   reset_after_fork()      reset_after_fork(): no record survives in a child;
//   callback, entry points  rearm_if_stale() (rearm.hpp), the rule itself; its
//                           first look at an untimed claim starts the clock
//                           (time_claim()).
//
// Every member is relaxed except the claim move (move_claim_seq(), acq_rel):
// the numbers and the clock are heuristics that can make a re-arm early or
// late, never add a fourth outstanding call.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "deferred_cleanup/host.hpp"

namespace deferred_cleanup {

/// Slots in the ring of call tokens.  A slot is reused kCallTokens tokens
/// later; a running call reads its number first thing and at most three of
/// the queue's calls are outstanding, so only a call lost by the host (which
/// never reads it) can see its slot reused.
///
/// Thread: any (a constant).  Memory ordering: n/a.  Errors: n/a.
/// Source: this project.
DEFERRED_CLEANUP_LOCAL inline constexpr std::size_t kCallTokens = 64;

/// The bound on the queue's pending calls outstanding at once, whatever the
/// host loses: the claim's call, one call a re-arm superseded, and one call
/// the main thread added past that bound (rearm.hpp, rules 1-3).  Without
/// re-arms (no lost call) the bound is one.
///
/// Thread: any (a constant).  Memory ordering: n/a.  Errors: n/a.
/// Source: this project; verified by the model (tests/model) and
/// calls_outstanding() in the tests.
DEFERRED_CLEANUP_LOCAL inline constexpr std::uint32_t kMaxCallsOutstanding = 3;

/// The claim time of a claim whose call is in the host's ring but that no
/// re-arm check has looked at yet ("added, not yet timed"): the smallest
/// int64, which is neither 0 ("no clock") nor a time the core stores (every
/// stamp goes through claim_stamp(), which maps the host clock away from 0
/// and from this value).
///
/// Thread: any (a constant).  Memory ordering: n/a.  Errors: n/a.
/// Source: this project (rearm.hpp, the lazy stale clock).
DEFERRED_CLEANUP_LOCAL inline constexpr std::int64_t kClaimUntimed =
    std::numeric_limits<std::int64_t>::min();

/// A host clock reading as a claim time: `now`, except that 0 ("no clock")
/// and kClaimUntimed become 1, so that a stamp is never mistaken for either.
/// A monotonic clock in nanoseconds (host.hpp; the CPython host's counts
/// from boot) returns neither in practice; if one did, the stamp would be
/// off and a re-arm early or late, as with any stale view of the clock.
///
/// Thread: any.  Never blocks.  Memory ordering: none (a value).
/// Errors: none.  Source: this project.
/// @param now a host clock reading (Host::now_ns)
/// @return the claim time to store
constexpr std::int64_t claim_stamp(std::int64_t now) noexcept {
  return (now == 0 || now == kClaimUntimed) ? 1 : now;
}

template <class P>
class BasicQueue;

/// The argument of one pending call of the reference: the queue and the
/// call's sequence number, so the call knows whether it is the current
/// claim's call or one that a re-arm superseded.
///
/// Thread: `seq` written by the adding producer before add_pending_call,
/// read by the pending call on the main thread; `queue` written once by the
/// queue's constructor (RearmState).
/// Memory ordering: `seq` is relaxed; the host's add_pending_call /
/// pending-call hand-off (CPython's pending-call lock) orders the write
/// before the call reads it.
/// Errors: none.
/// Source: this project (docs/design/rearm).
template <class P>
struct CallToken {
  BasicQueue<P>* queue = nullptr;     ///< the queue to drain (set by its constructor)
  std::atomic<std::uint64_t> seq{0};  ///< the call's sequence number (>= 1)
};

/// The re-arm rule's state: call tokens, the claim's sequence number, the
/// records of superseded and main-thread calls, and the claim's stale clock.
/// A member of every BasicQueue (`rearm`); only the reference uses it.
///
/// Thread: see each member.  Nothing blocks.
/// Memory ordering: relaxed, except move_claim_seq() (acq_rel, acquire on
/// failure).
/// Errors: none.
/// Source: this project (docs/design/rearm).
template <class P>
class RearmState {
 public:
  /// Bind the call tokens to their queue.
  ///
  /// Thread: the queue's constructor, before publication.
  /// Memory ordering: plain; published with the queue.
  /// Errors: none.  Source: this project.
  /// @param queue the queue whose pending calls carry these tokens
  explicit RearmState(BasicQueue<P>* queue) noexcept {
    for (CallToken<P>& t : tokens_) t.queue = queue;  // written once, before publication
  }

  RearmState(const RearmState&) = delete;
  RearmState& operator=(const RearmState&) = delete;

  /// Hook of schedule(): a new claim's call gets a numbered token, becomes
  /// the claim's call, and its stale clock is stopped until the call is in
  /// the host's ring (call_added()).
  ///
  /// Thread: the producer that just claimed.  Never blocks.
  /// Memory ordering: relaxed (see the members it calls).
  /// Errors: none.  Source: this project.
  /// @return the token to pass as the pending call's argument
  CallToken<P>* token_for_claim() noexcept {
    set_claimed_at(0);  // not stale before our call is in the ring
    CallToken<P>* token = new_call_token();
    set_claim_seq(token->seq.load(std::memory_order_relaxed));  // our own store
    return token;
  }

  /// Hook of schedule(): the claim's call numbered `seq` was added; mark it
  /// "added, not yet timed" (claim time 0 -> kClaimUntimed, only while call
  /// `seq` is still the claim's call).  The claimant reads no clock: the
  /// first re-arm check that looks at the claim starts its stale clock
  /// (time_claim(), rearm.hpp), so a claim is stale once it has been seen
  /// outstanding for the stale bound.
  ///
  /// Thread: the producer that added it, after add_pending_call returned 0.
  /// Never blocks.
  /// Memory ordering: relaxed load and CAS (a heuristic, as
  /// start_stale_clock()).  Errors: none.  Source: this project.
  /// @param seq the added call's number
  /// @param host the queue's host (no clock: the claim stays at 0, and no
  ///        claim ever looks stale)
  void call_added(std::uint64_t seq, const Host& host) noexcept {
    if (host.now_ns != nullptr) arm_claim_time(seq, kClaimUntimed);
  }

  /// Hook of pending_call(): the claim's call clears scheduled_; its stale
  /// clock stops.
  ///
  /// Thread: main thread, in the pending call.  Memory ordering: relaxed.
  /// Errors: none.  Source: this project.
  void stop_stale_clock() noexcept { set_claimed_at(0); }

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
  CallToken<P>* new_call_token() noexcept {
    // Sequence numbers only; orders nothing.
    const std::uint64_t seq = next_seq_.fetch_add(1, std::memory_order_relaxed) + 1;
    CallToken<P>& t = tokens_[seq % kCallTokens];
    // Published to the pending call by the host's hand-off.
    t.seq.store(seq, std::memory_order_relaxed);
    return &t;
  }

  /// Make `seq` the current claim's call.
  ///
  /// Thread: the claimant or the re-armer.  Memory ordering: relaxed (see
  /// the essay of rearm.hpp: a stale view only makes an old call
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
  /// Thread: the main thread at an entry point (rearm.hpp,
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

  // [doc:call-ran]
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

  // [end-doc:call-ran]

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

  /// Set the claim time: 0 for no clock (the only value the core passes).
  ///
  /// Thread: the claimant, the re-armer or the drain.
  /// Memory ordering: relaxed: a heuristic for the re-arm rule; a stale or
  /// torn view can only make a re-arm early or late, never exceed three calls.
  /// Errors: none.
  /// Source: this project.
  /// @param ns 0, kClaimUntimed or a claim_stamp()
  void set_claimed_at(std::int64_t ns) noexcept {
    // Heuristic only.
    claimed_at_ns_.store(ns, std::memory_order_relaxed);
  }

  /// The claim time: 0 (no clock running), kClaimUntimed (the claim's call
  /// was added, nobody has looked since), or the claim_stamp() of the first
  /// look (or of the re-armer's add).
  ///
  /// Thread: any.  Memory ordering: relaxed.  Errors: none.
  /// Source: this project.
  /// @return 0, kClaimUntimed, or host clock in nanoseconds
  std::int64_t claimed_at() const noexcept {
    // Heuristic only.
    return claimed_at_ns_.load(std::memory_order_relaxed);
  }

  /// Start (or give back) the claim's stale clock at `now`: claim time
  /// 0 -> claim_stamp(now), only while call `seq` is still the claim's call
  /// (a claim is never stale before its call is in the host's ring, so a
  /// re-arm can never overtake the call it supersedes and break the
  /// first-in, first-out order that call_ran() relies on).  The re-armer
  /// has just looked, so its own call starts timed; a claimant's call starts
  /// untimed (call_added()).
  ///
  /// Thread: the re-armer, after add_pending_call returned 0 (or after a
  /// refusal, or to give a stale claim back).
  /// Memory ordering: relaxed (a heuristic; a call that already ran took
  /// the claim back to 0, and re-arming needs a non-zero claim).
  /// Errors: none.
  /// Source: this project.
  /// @param seq the added call's number
  /// @param now the caller's clock (or the stamp it took)
  void start_stale_clock(std::uint64_t seq, std::int64_t now) noexcept {
    arm_claim_time(seq, claim_stamp(now));
  }

  /// The first look at an added, untimed claim starts its stale clock:
  /// claim time kClaimUntimed -> claim_stamp(now).  One looker wins; the
  /// others (and a looker whose claim ran or moved meanwhile) change
  /// nothing.  The value kClaimUntimed is stored only after the claim's
  /// call is in the host's ring (call_added()), so a claim timed here was
  /// in the ring before the clock started.
  ///
  /// Thread: any caller of rearm_if_stale() (rearm.hpp).  Never blocks.
  /// Memory ordering: relaxed CAS (a heuristic, as start_stale_clock()).
  /// Errors: none.
  /// Source: this project.
  /// @param now the caller's clock
  /// @return true if this caller started the clock
  bool time_claim(std::int64_t now) noexcept {
    std::int64_t untimed = kClaimUntimed;
    // Heuristic only; one starter.
    return claimed_at_ns_.compare_exchange_strong(untimed, claim_stamp(now),
                                                  std::memory_order_relaxed);
  }

  /// Move the claim time from `seen` (a stamp, never kClaimUntimed) to 0,
  /// so that one re-armer wins per stale claim (the re-armer starts the
  /// clock again once its call was added).
  ///
  /// Thread: any.  Memory ordering: relaxed CAS.  Errors: none.
  /// Source: this project.
  /// @param seen the value read by claimed_at()
  /// @return true if this caller moved it
  bool take_stale_claim(std::int64_t seen) noexcept {
    // One winner per stale claim; orders nothing.
    return claimed_at_ns_.compare_exchange_strong(seen, 0, std::memory_order_relaxed);
  }

  /// Hook of BasicQueue::reset_after_fork(): no superseded or main-thread
  /// call and no stale clock survives in a fork() child.
  ///
  /// Thread: the forking thread, in the child (one thread).
  /// Memory ordering: relaxed stores.  Errors: none.
  /// Source: POSIX fork(2).
  void reset_after_fork() noexcept {
    // One thread in the child.
    superseded_seq_.store(0, std::memory_order_relaxed);
    // One thread in the child.
    main_seq_.store(0, std::memory_order_relaxed);
    // One thread in the child.
    claimed_at_ns_.store(0, std::memory_order_relaxed);
  }

 private:
  /// Claim time 0 -> `at` (kClaimUntimed or a stamp), only while call `seq`
  /// is the claim's call: start_stale_clock() and call_added().
  ///
  /// Thread: the claimant or the re-armer.  Memory ordering: relaxed.
  /// Errors: none.  Source: this project.
  /// @param seq the added call's number
  /// @param at the claim time to store
  void arm_claim_time(std::uint64_t seq, std::int64_t at) noexcept {
    if (claim_seq() != seq) return;  // it ran already, or a re-arm moved on
    std::int64_t zero = 0;
    // Heuristic only.
    claimed_at_ns_.compare_exchange_strong(zero, at, std::memory_order_relaxed);
  }

  /// Slots of the call tokens (CallToken, kCallTokens).
  CallToken<P> tokens_[kCallTokens];
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
  /// The claim time: 0, kClaimUntimed or a stamp (claimed_at(); a heuristic).
  std::atomic<std::int64_t> claimed_at_ns_{0};
};

}  // namespace deferred_cleanup
