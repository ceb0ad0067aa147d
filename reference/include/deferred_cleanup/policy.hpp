// policy.hpp: the three variants, as compile-time policies.
//
// The queue (queue.hpp) and the functions around it are templates over a
// policy.  A policy fixes two things at compile time:
//
//   * the memory order of every atomic operation that takes part in one of the
//     store-buffering handshakes (queue.hpp explains them), as constants, so
//     the compiler emits each variant's own instruction shape: on x86-64 a
//     seq_cst store is `xchg` (or `mov` + `mfence`), a release store a plain
//     `mov`; a seq_cst load and an acquire load are both a plain `mov`;
//   * the shape of the protocol: where the drain clears `scheduled_`, whether
//     producers pass the in-flight gate, whether entry points drain directly,
//     which shutdown steps exist.
//
// Three policies, each faithful to one named source:
//
//   ReferencePolicy   this project's design.  seq_cst on both store-buffering
//                     pairs; the producer's fast path (push, then one load of
//                     `scheduled_`); clear-then-take in the drain; the
//                     in-flight gate; direct drains at entry points (gh-95820);
//                     the exit sequence of shutdown.hpp; re-arming a stale
//                     claim.
//   SeedPolicy        the design as the text of cuda-python PR #2371 states it:
//                     a Py_AtExit callback stops `accepting_`; the drain checks
//                     whether Python is finalizing and then leaks; take loop,
//                     then clear, then re-check and reschedule; no gate, no
//                     final drain, no direct drain.  Where the text is silent
//                     (the exact orders, the head_ test before the claim) it
//                     follows the shipped code below.
//   CudaCore12Policy  the cuda-core 1.2.0 wheel as shipped (the same logic in
//                     1.2.2): no Py_AtExit at all; schedule() returns early when
//                     `!Py_IsInitialized() || finalizing`; drain loops the
//                     exchange, then release-clears `scheduled_`, then
//                     acquire-loads `head_`.  Source:
//                     cuda_core/cuda/core/_cpp/resource_handles.cpp at the 1.2.0
//                     release (later moved to _cpp/rt/py_deferred_cleanup.cpp
//                     without a change of logic); checked against the wheel's
//                     `nm -D` and `objdump -d` (docs: "The lost wakeup on real
//                     hardware").
//
// Each order constant carries, on the comment line above it, a tag
// `[litmus:NAME]`: tests/test_litmus.py reads the three policies and checks
// the orders against the litmus files of the same tags (tests/litmus/).
#pragma once

#include <atomic>
#include <cstdint>

/// The alignment of the queue's three contended fields (head_, scheduled_,
/// in_flight_), each on a cache line of its own, so that producers' CASes on
/// head_ do not take away the line their fast-path load of scheduled_ reads.
/// The benchmarks also build with 8, where the three share one line.
#ifndef DC_QUEUE_FIELD_ALIGN
#define DC_QUEUE_FIELD_ALIGN 64
#endif

namespace deferred_cleanup {

/// Which variant a queue follows; one per policy.
///
/// Thread: a constant.  Memory ordering: n/a.  Errors: n/a.
/// Source: cuda-python PR #2371 (seed, cuda_core_1_2); docs/design (reference).
enum class Variant : std::uint8_t {
  reference,      ///< ReferencePolicy
  seed,           ///< SeedPolicy: the PR #2371 text
  cuda_core_1_2,  ///< CudaCore12Policy: the cuda-core 1.2.0 wheel
  /// CudaCore12FixedPolicy: the wheel plus the three minimal fixes
  cuda_core_1_2_fixed,
};

/// Where the drain clears `scheduled_` relative to taking the list.
///
/// Thread: a constant.  Memory ordering: n/a.  Errors: n/a.
/// Source: drain.hpp (reference); cuda-python PR #2371 (the other two).
enum class DrainShape : std::uint8_t {
  /// Clear, then take until empty (the consumer half of a store-buffering
  /// pair whose both halves are seq_cst).
  clear_then_take,
  /// Take until empty, then clear, then re-check `head_` and reschedule if it
  /// is not empty.
  take_clear_recheck,
};

/// The reference: this project's design.
///
/// Thread: a type of constants.  Memory ordering: the constants below.
/// Errors: n/a.
/// Source: docs/design (each constant's page); C++20 [atomics.order] for the
/// single total order S of seq_cst operations.
struct ReferencePolicy {
  static constexpr Variant variant = Variant::reference;  ///< the variant this policy is
  static constexpr const char* name = "reference";        ///< DEFERRED_CLEANUP_VARIANT value

  /// Push: in S before this producer's check of scheduled_.
  /// [litmus:wakeup.push]
  static constexpr std::memory_order push = std::memory_order_seq_cst;
  /// Fast-path check of scheduled_ after the push; in S after the push.
  /// [litmus:wakeup.check]
  static constexpr std::memory_order check = std::memory_order_seq_cst;
  /// The claim (scheduled_ false -> true, an exchange); in S after the push.
  /// [litmus:wakeup.claim]
  static constexpr std::memory_order claim = std::memory_order_seq_cst;
  /// The drain's clear of scheduled_; in S before its take.
  /// [litmus:wakeup.clear]
  static constexpr std::memory_order clear = std::memory_order_seq_cst;
  /// The drain's take (head_ exchange); in S after the clear.
  /// [litmus:wakeup.take]
  static constexpr std::memory_order take = std::memory_order_seq_cst;
  /// Not used by this drain shape (no re-check after the clear).
  static constexpr std::memory_order recheck = std::memory_order_seq_cst;

  /// Gate entry (in_flight_ increment); in S before the accepting_ check.
  /// [litmus:gate.enter]
  static constexpr std::memory_order gate_enter = std::memory_order_seq_cst;
  /// Producer's accepting_ check inside the gate.
  /// [litmus:gate.check]
  static constexpr std::memory_order gate_check = std::memory_order_seq_cst;
  /// Shutdown's close of accepting_; in S before its in_flight_ read.
  /// [litmus:gate.close]
  static constexpr std::memory_order gate_close = std::memory_order_seq_cst;
  /// Shutdown's read of in_flight_.
  /// [litmus:gate.wait]
  static constexpr std::memory_order gate_wait = std::memory_order_seq_cst;

  /// Where the drain clears scheduled_.
  static constexpr DrainShape drain_shape = DrainShape::clear_then_take;
  /// Producer returns after push + one load when a call is outstanding.
  static constexpr bool fast_path = true;
  /// Producers pass the in-flight gate before calling the host.
  static constexpr bool gate = true;
  /// Main-thread entry points drain directly (gh-95820).
  static constexpr bool direct_drain = true;
  /// A claim whose pending call has not run within the stale bound may be
  /// re-armed (rearm.hpp; at most kMaxCallsOutstanding, three, of the
  /// queue's pending calls outstanding).
  static constexpr bool rearm = true;
  /// schedule() asks the host whether it is finalizing (cuda-core 1.2.0).
  static constexpr bool schedule_checks_finalizing = false;
  /// The drain asks the host whether it is finalizing and then leaks.
  static constexpr bool drain_checks_finalizing = false;
  /// schedule() returns at once when head_ is empty (cuda-core 1.2.0).
  static constexpr bool schedule_checks_head = false;
  /// A Py_AtExit callback stops accepting_ (the PR #2371 text).
  static constexpr bool close_at_py_atexit = false;
};

/// The seed: the PR #2371 text (acquire/release; policy.hpp's essay).
///
/// Thread: a type of constants.  Memory ordering: the constants below.
/// Errors: n/a.
/// Source: cuda-python PR #2371 (description); where it is silent,
/// cuda_core/cuda/core/_cpp/resource_handles.cpp at cuda-core 1.2.0.
struct SeedPolicy {
  static constexpr Variant variant = Variant::seed;  ///< the variant this policy is
  static constexpr const char* name = "seed";        ///< DEFERRED_CLEANUP_VARIANT value

  /// [litmus:wakeup.push]
  static constexpr std::memory_order push = std::memory_order_release;
  /// The head_ test before the claim (shipped code; the text is silent).
  /// [litmus:wakeup.check]
  static constexpr std::memory_order check = std::memory_order_acquire;
  /// compare_exchange false -> true (shipped code: acq_rel, failure relaxed).
  /// [litmus:wakeup.claim]
  static constexpr std::memory_order claim = std::memory_order_acq_rel;
  /// [litmus:wakeup.clear]
  static constexpr std::memory_order clear = std::memory_order_release;
  /// [litmus:wakeup.take]
  static constexpr std::memory_order take = std::memory_order_acquire;
  /// The drain's re-check of head_ after the clear.
  /// [litmus:wakeup.recheck]
  static constexpr std::memory_order recheck = std::memory_order_acquire;

  /// No gate: only the accepting_ flag, stopped by the Py_AtExit callback.
  /// [litmus:gate.check]
  static constexpr std::memory_order gate_check = std::memory_order_acquire;
  /// [litmus:gate.close]
  static constexpr std::memory_order gate_close = std::memory_order_release;

  /// Where the drain clears scheduled_.
  static constexpr DrainShape drain_shape = DrainShape::take_clear_recheck;
  static constexpr bool fast_path = false;     ///< push + one load when a call is outstanding
  static constexpr bool gate = false;          ///< producers pass the in-flight gate
  static constexpr bool direct_drain = false;  ///< entry points drain directly (gh-95820)
  static constexpr bool rearm = false;         ///< a stale claim may be re-armed
  /// Schedule() asks the host whether it is finalizing.
  static constexpr bool schedule_checks_finalizing = false;
  /// The drain asks the host whether it is finalizing, then leaks.
  static constexpr bool drain_checks_finalizing = true;
  /// Schedule() returns at once when head_ is empty.
  static constexpr bool schedule_checks_head = true;
  static constexpr bool close_at_py_atexit = true;  ///< a Py_AtExit callback stops accepting_
};

/// cuda-core 1.2.0 as shipped (policy.hpp's essay).
///
/// Thread: a type of constants.  Memory ordering: the constants below.
/// Errors: n/a.
/// Source: cuda_core/cuda/core/_cpp/resource_handles.cpp at cuda-core 1.2.0;
/// the wheel cuda_core-1.2.0-cp312 (cu13/_resource_handles*.so).
struct CudaCore12Policy {
  static constexpr Variant variant = Variant::cuda_core_1_2;  ///< the variant this policy is
  static constexpr const char* name = "cuda-core-1.2";        ///< DEFERRED_CLEANUP_VARIANT value

  /// compare_exchange_weak(head, item, release, relaxed) in enqueue().
  /// [litmus:wakeup.push]
  static constexpr std::memory_order push = std::memory_order_release;
  /// head_.load(acquire) in schedule() before the claim.
  /// [litmus:wakeup.check]
  static constexpr std::memory_order check = std::memory_order_acquire;
  /// scheduled_.compare_exchange_strong(false, true, acq_rel, relaxed).
  /// [litmus:wakeup.claim]
  static constexpr std::memory_order claim = std::memory_order_acq_rel;
  /// scheduled_.store(false, release) after the take loop.
  /// [litmus:wakeup.clear]
  static constexpr std::memory_order clear = std::memory_order_release;
  /// head_.exchange(nullptr, acquire) in the take loop.
  /// [litmus:wakeup.take]
  static constexpr std::memory_order take = std::memory_order_acquire;
  /// head_.load(acquire) after the clear: x86 `movb $0` then `mov`, no fence.
  /// [litmus:wakeup.recheck]
  static constexpr std::memory_order recheck = std::memory_order_acquire;

  /// No gate.  accepting_.load(acquire) at the top of schedule().
  /// [litmus:gate.check]
  static constexpr std::memory_order gate_check = std::memory_order_acquire;
  /// stop(): accepting_.store(false, release).
  /// [litmus:gate.close]
  static constexpr std::memory_order gate_close = std::memory_order_release;

  /// Where the drain clears scheduled_.
  static constexpr DrainShape drain_shape = DrainShape::take_clear_recheck;
  static constexpr bool fast_path = false;     ///< push + one load when a call is outstanding
  static constexpr bool gate = false;          ///< producers pass the in-flight gate
  static constexpr bool direct_drain = false;  ///< entry points drain directly (gh-95820)
  static constexpr bool rearm = false;         ///< a stale claim may be re-armed
  /// Schedule() asks the host whether it is finalizing.
  static constexpr bool schedule_checks_finalizing = true;
  /// The drain asks the host whether it is finalizing, then leaks.
  static constexpr bool drain_checks_finalizing = true;
  /// Schedule() returns at once when head_ is empty.
  static constexpr bool schedule_checks_head = true;
  static constexpr bool close_at_py_atexit = false;  ///< a Py_AtExit callback stops accepting_
};

/// The variant's name as DEFERRED_CLEANUP_VARIANT spells it.
///
/// Thread: any.  Memory ordering: n/a.  Errors: none.
/// Source: this project (the environment variable's values).
/// @param v a variant
/// @return "reference", "seed", "cuda-core-1.2" or "cuda-core-1.2-fixed"
constexpr const char* variant_name(Variant v) noexcept {
  switch (v) {
    case Variant::reference:
      return ReferencePolicy::name;
    case Variant::seed:
      return SeedPolicy::name;
    case Variant::cuda_core_1_2:
      return CudaCore12Policy::name;
    case Variant::cuda_core_1_2_fixed:
      return "cuda-core-1.2-fixed";  // CudaCore12FixedPolicy::name, declared below
  }
  return "?";
}

/// cuda-core 1.2.0 as shipped plus the smallest fix of each of its three
/// holes, as three separately named pieces, and nothing of the reference's
/// extras (no fast path, no direct drain, no re-arming, the shipped drain
/// shape and orders):
///
///   sb_fences     the lost wakeup (store buffering in the drain tail), below;
///   gate          the finalization hole (check-then-act): an in-flight
///                 counter that a producer raises (seq_cst) before the
///                 shipped `accepting_` and finalizing tests and lowers after
///                 Py_AddPendingCall returns; gate_check/gate_close/gate_wait
///                 become seq_cst, the store-buffering pair of the gate
///                 (tests/litmus/gate_sb_acqrel.litmus is allowed,
///                 gate_sb_reference.litmus forbidden);
///   exit_release  the exit hole: an exit hook in the Python atexit phase
///                 (before CPython sets its finalizing flag) that drains
///                 while destructors of destroyed graphs are due (bounded by
///                 the exit wait), closes `accepting_`, waits until no
///                 producer is in the gate, and drains once more
///                 (shutdown.hpp, steps 0-3; reference/src/exit.cpp).
///
/// The gate and the exit hook are one change in cuda-core (the hook is where
/// the gate is closed and waited out), so they share this one variant with
/// the fences; each is its own member below, so a mutant removes one alone.
/// Why each is more than one line: notes/upstream/cuda-core-*.md.
///
/// The fences: one seq_cst fence on each side of the drain tail's
/// store-buffering pair.
/// The drain puts a fence between its release clear of `scheduled_` and its
/// acquire re-check of `head_` (queue.hpp, recheck()); a producer puts one
/// between its push (and `head_` test) and its claim of `scheduled_`
/// (queue.hpp, claim()).  Every order constant is the shipped one.  Both
/// fences are needed in the C++ memory model: with either alone, or with the
/// drain's clear and re-check made seq_cst but the claim's failure order left
/// relaxed, herd7 still allows the lost outcome under rc11.cat and
/// c11_partialSC.cat (tests/litmus/wakeup_recheck_sb_fixed.litmus and
/// notes/upstream/cuda-core-store-buffering.md).  On x86-64 only the drain's
/// fence changes what the CPU may do (`mfence` after the `movb`); the
/// producer's `lock cmpxchg` is already a full barrier.
///
/// Selected at import by DEFERRED_CLEANUP_VARIANT=cuda-core-1.2-fixed (a
/// comparison variant, like cuda-core-1.2); also run by
/// tests/cpp/lost_wakeup.cpp and the benchmarks.
///
/// Thread: a type of constants.  Memory ordering: the constants below plus
/// the two fences (sb_fences).  Errors: n/a.
/// Source: cuda_core/cuda/core/_cpp/rt/py_deferred_cleanup.cpp at cuda-python
/// commit 08f74293 (the shipped orders); C++20 [atomics.fences] for the
/// fences; Python/pylifecycle.c Py_FinalizeEx (v3.12.0: the atexit handlers
/// run before the finalizing flag is set) for the exit hook.
struct CudaCore12FixedPolicy {
  static constexpr Variant variant = Variant::cuda_core_1_2_fixed;  ///< the variant this policy is
  static constexpr const char* name = "cuda-core-1.2-fixed";  ///< DEFERRED_CLEANUP_VARIANT value

  /// As shipped.
  /// [litmus:wakeup.push]
  static constexpr std::memory_order push = std::memory_order_release;
  /// As shipped.
  /// [litmus:wakeup.check]
  static constexpr std::memory_order check = std::memory_order_acquire;
  /// As shipped; a seq_cst fence precedes it (sb_fences).
  /// [litmus:wakeup.claim]
  static constexpr std::memory_order claim = std::memory_order_acq_rel;
  /// As shipped.
  /// [litmus:wakeup.clear]
  static constexpr std::memory_order clear = std::memory_order_release;
  /// As shipped.
  /// [litmus:wakeup.take]
  static constexpr std::memory_order take = std::memory_order_acquire;
  /// As shipped; a seq_cst fence precedes it (sb_fences).
  /// [litmus:wakeup.recheck]
  static constexpr std::memory_order recheck = std::memory_order_acquire;
  /// [litmus:gate.enter]
  /// The gate fix: the in-flight increment, in S before the accepting_ check.
  static constexpr std::memory_order gate_enter = std::memory_order_seq_cst;
  /// [litmus:gate.check]
  /// The gate fix: seq_cst (shipped: acquire), in S after gate_enter.
  static constexpr std::memory_order gate_check = std::memory_order_seq_cst;
  /// [litmus:gate.close]
  /// The gate fix: seq_cst (shipped: release), in S before gate_wait.
  static constexpr std::memory_order gate_close = std::memory_order_seq_cst;
  /// [litmus:gate.wait]
  /// The gate fix: the exit hook's read of in_flight_.
  static constexpr std::memory_order gate_wait = std::memory_order_seq_cst;

  /// The store-buffering fix: a seq_cst fence before the claim and before
  /// the re-check.
  static constexpr bool sb_fences = true;
  /// The finalization fix: producers pass the in-flight gate; the shipped
  /// accepting_, finalizing and head_ tests are made inside it.
  static constexpr bool gate = true;
  /// The exit fix: the atexit-phase exit hook (wait for due destructors,
  /// drain; with the gate: close, wait it out, final drain).
  static constexpr bool exit_release = true;

  /// Where the drain clears scheduled_.
  static constexpr DrainShape drain_shape = DrainShape::take_clear_recheck;
  static constexpr bool fast_path = false;     ///< push + one load when a call is outstanding
  static constexpr bool direct_drain = false;  ///< entry points drain directly (gh-95820)
  static constexpr bool rearm = false;         ///< a stale claim may be re-armed
  /// Schedule() asks the host whether it is finalizing (as shipped; inside
  /// the gate it is a second line of defence).
  static constexpr bool schedule_checks_finalizing = true;
  /// The drain asks the host whether it is finalizing, then leaks.
  static constexpr bool drain_checks_finalizing = true;
  /// Schedule() returns at once when head_ is empty.
  static constexpr bool schedule_checks_head = true;
  static constexpr bool close_at_py_atexit = false;  ///< a Py_AtExit callback stops accepting_
};

/// Whether policy P has the atexit-phase exit hook (shutdown.hpp steps 0-3):
/// the reference, and CudaCore12FixedPolicy's exit fix; false for a policy
/// without the member.
///
/// Thread: a constant.  Memory ordering: n/a.  Errors: n/a.
/// Source: this project (ReferencePolicy, CudaCore12FixedPolicy).
/// @return true for the reference or P::exit_release
template <class P>
consteval bool exit_release_of() {
  if constexpr (P::variant == Variant::reference) {
    return true;
  } else if constexpr (requires { P::exit_release; }) {
    return P::exit_release;
  } else {
    return false;
  }
}

/// Whether policy P puts a seq_cst fence on each side of the drain tail's
/// store-buffering pair (CudaCore12FixedPolicy); false for a policy without
/// the member.
///
/// Thread: a constant.  Memory ordering: n/a.  Errors: n/a.
/// Source: this project (CudaCore12FixedPolicy).
/// @return P::sb_fences, or false when P has no such member
template <class P>
consteval bool sb_fences_of() {
  if constexpr (requires { P::sb_fences; }) {
    return P::sb_fences;
  } else {
    return false;
  }
}

}  // namespace deferred_cleanup
