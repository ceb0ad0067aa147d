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

/// The variant's name as DEFERRED_CLEANUP_VARIANT spells it.
///
/// Thread: any.  Memory ordering: n/a.  Errors: none.
/// Source: this project (the environment variable's values).
/// @param v a variant
/// @return "reference", "seed" or "cuda-core-1.2"
constexpr const char* variant_name(Variant v) noexcept {
  switch (v) {
    case Variant::reference:
      return ReferencePolicy::name;
    case Variant::seed:
      return SeedPolicy::name;
    case Variant::cuda_core_1_2:
      return CudaCore12Policy::name;
  }
  return "?";
}

}  // namespace deferred_cleanup::comparison
