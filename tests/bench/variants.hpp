// SPDX-License-Identifier: Apache-2.0
// variants.hpp: the variants of the core, as the benchmarks see them.
//
// Each variant is a type with a `name`, a `Queue` type, `make()` (a queue on
// the ring host of ring_host.hpp), `destroyed()` (the destructor path: push +
// schedule, what a user object's destructor runs on a driver thread),
// `pending_call()` (what the host runs on the main thread) and `drain()` (the
// consumer).  Everything calls the real headers under include.
#pragma once

#include <atomic>
#include <memory>

#include "deferred_cleanup/callback.hpp"
#include "deferred_cleanup/comparison/policies.hpp"
#include "deferred_cleanup/drain.hpp"
#include "deferred_cleanup/item.hpp"
#include "ring_host.hpp"

#include "deferred_cleanup/policy.hpp"
#include "deferred_cleanup/scheduling.hpp"

namespace dc_bench {

namespace core = ::deferred_cleanup;

/// The host every benchmark queue uses: the ring of ring_host.hpp, and the
/// steady clock (the reference's fast path reads it on a sample of its
/// calls, to re-arm a pending call that stayed outstanding too long).
inline const core::Host* ring_host() {
  static const core::Host host{
      .add_pending_call = &ring_add_pending_call,
      .is_main_thread = &ring_is_main_thread,
      .in_gate = nullptr,
      .now_ns = &ring_now_ns,
      .finalizing = &ring_finalizing,
  };
  return &host;
}

template <class Policy, const char* Name>
struct PolicyVariant {
  static constexpr const char* name = Name;
  using Queue = core::BasicQueue<Policy>;
  static std::unique_ptr<Queue> make() { return std::make_unique<Queue>(ring_host()); }
  static void destroyed(Queue& q, core::DeferredCleanupItem* item) {
    core::on_user_object_destroyed(q, item);
  }
  /// The pending call the host would run for the current claim.  The
  /// reference's argument is a call token (rearm_state.hpp, CallToken) carrying
  /// the claim's sequence number; the comparison variants take the queue.
  static int pending_call(Queue& q) {
    if constexpr (Policy::rearm) {
      core::CallToken<Policy> token;
      token.queue = &q;
      token.seq.store(q.rearm.claim_seq(), std::memory_order_relaxed);  // one thread
      return core::pending_call<Policy>(&token);
    } else {
      return core::pending_call<Policy>(&q);
    }
  }
  static std::size_t drain(Queue& q) { return core::drain_all(q); }
};

inline constexpr char kReference[] = "reference";
inline constexpr char kSeed[] = "seed";
inline constexpr char kCudaCore12[] = "cuda-core-1.2";
using Reference = PolicyVariant<core::ReferencePolicy, kReference>;
using Seed = PolicyVariant<core::comparison::SeedPolicy, kSeed>;
using CudaCore12 = PolicyVariant<core::comparison::CudaCore12Policy, kCudaCore12>;
#ifdef DC_BENCH_WITH_FIXED
// The cost of the lost-wakeup fix against the shipped shape, measured apart
// (notes/upstream/cuda-core-store-buffering.md): off by default, so that the
// docs' benchmark table keeps its three variants.
inline constexpr char kCudaCore12Fixed[] = "cuda-core-1.2-fixed";
using CudaCore12Fixed = PolicyVariant<core::comparison::CudaCore12FixedPolicy, kCudaCore12Fixed>;
#define DC_BENCH_VARIANTS(X) X(Reference) X(Seed) X(CudaCore12) X(CudaCore12Fixed)
#else
#define DC_BENCH_VARIANTS(X) X(Reference) X(Seed) X(CudaCore12)
#endif

// ------------------------------------------------------------ ablations
// The slow-path breakdown (docs/performance.rst, "Where the slow path's time
// goes"): the reference's policy with one switch turned off, each measured
// only on the two destructor rows (batch16/destructor/<v>/none and
// destructor/<v>/outstanding).  Bench-only: none of these is a supported
// variant, and each is unsafe in a way the page cites (the model or litmus
// record that fails without the piece).  Every switch is a member the real
// headers already test with `if constexpr`.

/// The reference without re-arming: no call token, no stale clock (rearm.hpp).
struct ReferenceNoRearmPolicy : core::ReferencePolicy {
  static constexpr bool rearm = false;
};
/// The reference without the in-flight gate: no gate_enter/gate_leave RMWs
/// (scheduling.hpp; queue.hpp gate_enter()).
struct ReferenceNoGatePolicy : core::ReferencePolicy {
  static constexpr bool gate = false;
};
/// The reference with neither: the claim and the host call remain.
struct ReferenceNoGateNoRearmPolicy : core::ReferencePolicy {
  static constexpr bool gate = false;
  static constexpr bool rearm = false;
};

inline constexpr char kReferenceNoRearm[] = "reference-no-rearm";
inline constexpr char kReferenceNoGate[] = "reference-no-gate";
inline constexpr char kReferenceNoGateNoRearm[] = "reference-no-gate-no-rearm";
inline constexpr char kCudaCore12FixedAblation[] = "cuda-core-1.2-fixed";
using ReferenceNoRearm = PolicyVariant<ReferenceNoRearmPolicy, kReferenceNoRearm>;
using ReferenceNoGate = PolicyVariant<ReferenceNoGatePolicy, kReferenceNoGate>;
using ReferenceNoGateNoRearm = PolicyVariant<ReferenceNoGateNoRearmPolicy, kReferenceNoGateNoRearm>;
using CudaCore12FixedAblation =
    PolicyVariant<core::comparison::CudaCore12FixedPolicy, kCudaCore12FixedAblation>;
/// The breakdown's rows, in the order the page lists them.
#define DC_BENCH_ABLATIONS(X) \
  X(ReferenceNoRearm) X(ReferenceNoGate) X(ReferenceNoGateNoRearm) X(CudaCore12FixedAblation)

// ------------------------------------------------------------ one producer
// The one-producer breakdown (docs/performance.rst, "Where one producer's
// time goes"): the reference's fast path (push, check of scheduled_, the
// sampled re-arm check) with one piece weakened or removed, and the
// reference with the look at its old rate (reference-sample-16), each
// measured on mt/destructor/<v>/threads:1 and destructor/<v>/outstanding
// only.  Bench-only and unsafe, each in a way the page cites;
// reference-no-rearm (above) is the row without re-arm.

/// The reference with the push's CAS release instead of seq_cst (the
/// comparison variants' order; on x86-64 both are one `lock cmpxchg`).
struct ReferencePushReleasePolicy : core::ReferencePolicy {
  static constexpr std::memory_order push = std::memory_order_release;
};
/// The reference with the fast-path load of scheduled_ acquire instead of
/// seq_cst (on x86-64 both are one plain `mov`).
struct ReferenceCheckAcquirePolicy : core::ReferencePolicy {
  static constexpr std::memory_order check = std::memory_order_acquire;
};

/// The reference's queue with the destructor path cut to the push alone
/// (BasicQueue::push of queue.hpp): no check of scheduled_, no re-arm, no
/// claim.  The floor of any hand-off that pushes onto this queue; it never
/// asks for a pending call, so only a call made before (the benchmark's first
/// destructor, through the real hand-off) ever drains what it pushes.
template <class Policy, const char* Name>
struct PushOnlyVariant : PolicyVariant<Policy, Name> {
  using Queue = typename PolicyVariant<Policy, Name>::Queue;
  static void destroyed(Queue& q, core::DeferredCleanupItem* item) { q.push(item); }
};

/// The reference looking at the claim's age at the rate it had before the
/// one-producer decision (rearm_sample_log2 = 4, one fast-path hit in 16;
/// the reference's own rate is ReferencePolicy::rearm_sample_log2): what the
/// look costs one producer at that rate.
struct ReferenceSample16Policy : core::ReferencePolicy {
  static constexpr unsigned rearm_sample_log2 = 4;
};

inline constexpr char kReferencePushRelease[] = "reference-push-release";
inline constexpr char kReferenceCheckAcquire[] = "reference-check-acquire";
inline constexpr char kReferencePushOnly[] = "reference-push-only";
inline constexpr char kReferenceSample16[] = "reference-sample-16";
using ReferencePushRelease = PolicyVariant<ReferencePushReleasePolicy, kReferencePushRelease>;
using ReferenceCheckAcquire = PolicyVariant<ReferenceCheckAcquirePolicy, kReferenceCheckAcquire>;
using ReferencePushOnly = PushOnlyVariant<core::ReferencePolicy, kReferencePushOnly>;
using ReferenceSample16 = PolicyVariant<ReferenceSample16Policy, kReferenceSample16>;
/// The one-producer breakdown's rows (besides the reference and
/// reference-no-rearm), in the order the page lists them.
#define DC_BENCH_ONE_PRODUCER_ABLATIONS(X) \
  X(ReferencePushRelease) X(ReferenceCheckAcquire) X(ReferencePushOnly) X(ReferenceSample16)

using Item = core::DeferredCleanupItem;

}  // namespace dc_bench
