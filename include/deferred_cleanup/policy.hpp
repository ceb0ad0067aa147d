// SPDX-License-Identifier: Apache-2.0
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
// Three policies, each faithful to one named source.  Only ReferencePolicy is
// here, in the core; the two comparison policies, deliberately faulty and kept
// to measure and test the faults they reproduce, live in
// deferred_cleanup/comparison/policies.hpp, namespace
// deferred_cleanup::comparison, out of a user's way:
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
// `[litmus:NAME]`: tests/test_litmus.py reads the three policies (this file
// and comparison/policies.hpp) and checks the orders against the litmus files
// of the same tags (tests/litmus/).
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

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
  seed,           ///< comparison::SeedPolicy: the PR #2371 text
  cuda_core_1_2,  ///< comparison::CudaCore12Policy: the cuda-core 1.2.0 wheel
  /// comparison::CudaCore12FixedPolicy: the wheel plus the three minimal fixes
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
  /// A fast-path hit looks at the claim's age for about one item in
  /// 2^rearm_sample_log2, here 1 in 2^6 = 64 (sample_stale_check(),
  /// callback.hpp): the one place that states the rate.  Not more often,
  /// because the look (a read of the claim's time and of the host clock) is
  /// what kept one producer below its target against the bare Treiber push
  /// (docs/performance.rst, "Where one producer's time goes",
  /// perf-one-producer-breakdown); main-thread entry points look every time
  /// (docs/design/callback.rst, "Sampling the stale-claim check").
  static constexpr unsigned rearm_sample_log2 = 6;
  /// schedule() asks the host whether it is finalizing (cuda-core 1.2.0).
  static constexpr bool schedule_checks_finalizing = false;
  /// The drain asks the host whether it is finalizing and then leaks.
  static constexpr bool drain_checks_finalizing = false;
  /// schedule() returns at once when head_ is empty (cuda-core 1.2.0).
  static constexpr bool schedule_checks_head = false;
  /// A Py_AtExit callback stops accepting_ (the PR #2371 text).
  static constexpr bool close_at_py_atexit = false;
};

namespace detail {
/// P::exit_release when P declares it, else false (C++17 detection).
template <class P, class = void>
struct exit_release_member : std::false_type {};
template <class P>
struct exit_release_member<P, std::void_t<decltype(P::exit_release)>>
    : std::bool_constant<P::exit_release> {};
/// P::sb_fences when P declares it, else false (C++17 detection).
template <class P, class = void>
struct sb_fences_member : std::false_type {};
template <class P>
struct sb_fences_member<P, std::void_t<decltype(P::sb_fences)>> : std::bool_constant<P::sb_fences> {
};
}  // namespace detail

/// Whether policy P has the atexit-phase exit hook (shutdown.hpp steps 0-3):
/// the reference, and comparison::CudaCore12FixedPolicy's exit fix; false
/// for a policy without the member.
///
/// Thread: a constant.  Memory ordering: n/a.  Errors: n/a.
/// Source: this project (ReferencePolicy, comparison::CudaCore12FixedPolicy).
/// @return true for the reference or P::exit_release
template <class P>
constexpr bool exit_release_of() {
  if constexpr (P::variant == Variant::reference) {
    return true;
  } else {
    return detail::exit_release_member<P>::value;
  }
}

/// Whether policy P puts a seq_cst fence on each side of the drain tail's
/// store-buffering pair (comparison::CudaCore12FixedPolicy); false for a
/// policy without the member.
///
/// Thread: a constant.  Memory ordering: n/a.  Errors: n/a.
/// Source: this project (comparison::CudaCore12FixedPolicy).
/// @return P::sb_fences, or false when P has no such member
template <class P>
constexpr bool sb_fences_of() {
  return detail::sb_fences_member<P>::value;
}

}  // namespace deferred_cleanup
