// SPDX-License-Identifier: Apache-2.0
// comparison/policies.hpp: the two deliberately faulty comparison policies.
//
// Not for use in an extension.  Each reproduces one named source exactly,
// faults included, so that the tests and the measurements can show those
// faults against the same queue code (policy.hpp's essay names them):
//
//   SeedPolicy        the design as the text of cuda-python PR #2371 states it;
//   CudaCore12Policy  the cuda-core 1.2.0 wheel as shipped (same logic in 1.2.2).
//
// An extension uses deferred_cleanup::Queue (queue.hpp), the reference, and
// never includes this file.  The reference module deferred_cleanup._native
// compiles all three so that DEFERRED_CLEANUP_VARIANT chooses one at import.
#pragma once

#include "deferred_cleanup/policy.hpp"
#include "deferred_cleanup/queue.hpp"

// The namespace is documented in docs/namespace.dox.
namespace deferred_cleanup::comparison {

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

/// The queue of the seed variant (the cuda-python PR #2371 text).
///
/// Thread: see BasicQueue.  Memory ordering: SeedPolicy's constants.
/// Errors: none.  Source: cuda-python PR #2371 (policy.hpp's essay).
using SeedQueue = BasicQueue<SeedPolicy>;
/// The queue of the cuda-core-1.2 variant (the cuda-core 1.2.0 wheel).
///
/// Thread: see BasicQueue.  Memory ordering: CudaCore12Policy's constants.
/// Errors: none.  Source: cuda-core 1.2.0 (policy.hpp's essay).
using CudaCore12Queue = BasicQueue<CudaCore12Policy>;
/// The queue of the cuda-core-1.2-fixed variant (the wheel plus the minimal
/// fixes of its three holes).
///
/// Thread: see BasicQueue.  Memory ordering: CudaCore12FixedPolicy's
/// constants and fences.  Errors: none.  Source: policy.hpp.
using CudaCore12FixedQueue = BasicQueue<CudaCore12FixedPolicy>;

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
      return CudaCore12FixedPolicy::name;
  }
  return "?";
}

}  // namespace deferred_cleanup::comparison
