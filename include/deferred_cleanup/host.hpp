// SPDX-License-Identifier: Apache-2.0
// host.hpp: the core's faces toward its host, on the bottom floor beside item.hpp.
//
// The core (queue, callback, scheduling, drain, shutdown) never includes
// Python.h.  It meets the embedding runtime in three places, all here:
//
//   Host      what the core asks of the runtime: add a pending call, tell the
//             main thread, a clock; plain function pointers, filled in by the
//             CPython host (reference/src/host.cpp) or by the GoogleTest
//             fake (tests/cpp/fake_host.hpp);
//   Settings  what the runtime may tune (deferred_cleanup.configure()): the
//             stale-claim bound of the re-arm rule and the exit wait of the
//             shutdown sequence, with their defaults;
//   Stats     what the core reports: relaxed counters, read as a snapshot.
//
// Nothing here depends on the queue; every other header of the core may
// include this one.
#pragma once

#include <atomic>
#include <cstdint>

#include "deferred_cleanup/visibility.hpp"

namespace deferred_cleanup {

/// Signature of a pending-call function: CPython's `int (*)(void*)`.
///
/// Thread: such a function runs on the main thread, called by the host.
/// Memory ordering: n/a (a type).  Errors: returns 0, or -1 with an
/// exception set (CPython then raises it in the interrupted code).
/// Source: Py_AddPendingCall, Include/ceval.h (v3.10.0 ... v3.14.0).
using PendingCallFn = int (*)(void* arg);

// [doc:host]
/// What the core needs from the embedding runtime.
///
/// Thread: add_pending_call, in_gate, now_ns and finalizing are called from
/// producer threads that hold no Python thread state (and from the main
/// thread); is_main_thread and after_drain from the main thread.
/// add_pending_call may block briefly on the host's own lock (CPython's
/// pending-call mutex) and must not call back into the core.
/// Memory ordering: the host's own; the core relies only on "fn(arg) runs on
/// the main thread after add_pending_call returned 0, unless the host loses
/// it" (the re-arm rule covers a lost call).
/// Errors: add_pending_call returns -1 when it refuses; nothing throws.
/// Source: Py_AddPendingCall, Python/ceval_gil.c (v3.12.0, v3.13.0),
/// documented in Doc/c-api/init.rst.
struct Host {
  /// Schedule fn(arg) on the main thread (Py_AddPendingCall).  Thread: any,
  /// no thread state needed.  Returns 0 on success, -1 when refused.
  int (*add_pending_call)(PendingCallFn fn, void* arg) = nullptr;
  /// Whether the caller is the thread that runs drains.  Thread: any.
  bool (*is_main_thread)() = nullptr;
  /// Optional test hook between the last check and add_pending_call (may be
  /// nullptr).  Thread: the producer; may sleep.  Argument: the queue.
  void (*in_gate)(const void* queue) = nullptr;
  /// A monotonic clock in nanoseconds, for the re-arm rule (may be nullptr:
  /// then no claim ever looks stale).  Thread: any; must not block.
  std::int64_t (*now_ns)() = nullptr;
  /// Whether the host interpreter is finalizing or not initialized (may be
  /// nullptr: never).  Only the comparison variants ask.  Thread: any.
  bool (*finalizing)() = nullptr;
  /// Optional: called by pending_call after a drain; returns what the
  /// pending call returns (0, or -1 with an exception set to deliver a
  /// KeyboardInterrupt or SystemExit that a cleanup raised).  Thread: main.
  int (*after_drain)() = nullptr;
  /// Optional: asked by a drain after each cleanup whether to stop early
  /// (may be nullptr: never).  On true the drain puts the cleanups it has
  /// not run back on the queue, in their order, and makes sure a pending
  /// call is outstanding for them (drain.hpp, run_list).  The CPython host
  /// stops once a cleanup raised KeyboardInterrupt or SystemExit (or a
  /// signal handler run here did) and the drain can deliver it now.
  /// Thread: main, inside a drain, between two cleanups; may run the host's
  /// own handlers (CPython: PyErr_CheckSignals) but must not drain.
  /// Memory ordering: none asked of it; the put-back is push() (P::push).
  /// Errors: must not throw; a failure means "do not stop".
  bool (*stop_drain)() = nullptr;
};
// [end-doc:host]

// [doc:settings]
/// Default stale-claim bound of the re-arm rule: one second (nanoseconds).
///
/// Thread: any (a constant).  Memory ordering: n/a.  Errors: n/a.
/// Source: this project (deferred_cleanup.configure(stale_claim_s=...)).
DEFERRED_CLEANUP_LOCAL inline constexpr std::int64_t kDefaultStaleClaimNs = 1'000'000'000;

/// Default exit wait of the shutdown sequence's step 0: five seconds
/// (nanoseconds).
///
/// Thread: any (a constant).  Memory ordering: n/a.  Errors: n/a.
/// Source: this project (deferred_cleanup.configure(exit_wait_s=...)).
DEFERRED_CLEANUP_LOCAL inline constexpr std::int64_t kDefaultExitWaitNs = 5'000'000'000;

/// Default total wait of the Py_AtExit backstop for simulated drivers'
/// destructor calls and producers inside the host: five seconds
/// (nanoseconds), for all drivers together.
///
/// Thread: any (a constant).  Memory ordering: n/a.  Errors: n/a.
/// Source: this project (deferred_cleanup.configure(backstop_wait_s=...)).
inline constexpr std::int64_t kDefaultBackstopWaitNs = 5'000'000'000;

/// The settings deferred_cleanup.configure() writes, in one place.
///
/// Thread: written by the host's configure() (main thread), read by any
/// thread.
/// Memory ordering: relaxed: a setting orders nothing; a reader sees the old
/// or the new bound.
/// Errors: none (the host validates values before it stores them).
/// Source: this project.
struct Settings {
  /// Re-arm a claim older than this (nanoseconds, > 0; scheduling.hpp).
  std::atomic<std::int64_t> stale_claim_ns{kDefaultStaleClaimNs};
  /// The exit sequence's step 0 drains for at most this long while
  /// destructors are due (nanoseconds, >= 0; shutdown.hpp, host).
  std::atomic<std::int64_t> exit_wait_ns{kDefaultExitWaitNs};
  /// The Py_AtExit backstop waits at most this long in all, whatever the
  /// number of drivers (nanoseconds, >= 0; the CPython host's exit.cpp).
  std::atomic<std::int64_t> backstop_wait_ns{kDefaultBackstopWaitNs};
};
// [end-doc:settings]

/// Relaxed statistics counters.  Every counter is incremented with
/// std::memory_order_relaxed: they order nothing and are read as a snapshot.
/// None is touched on the producer's fast path.
///
/// Thread: any thread increments; any thread reads.
/// Memory ordering: relaxed; a snapshot may mix values from different moments.
/// Errors: none.
/// Source: this project (docs: "Troubleshooting" reads them).
struct Stats {
  std::atomic<std::uint64_t> created{0};                ///< items made (counted by the host)
  std::atomic<std::uint64_t> cleaned{0};                ///< cleanups run (drains + direct cleanups)
  std::atomic<std::uint64_t> direct_cleanups{0};        ///< items never handed off (cleanup_now)
  std::atomic<std::uint64_t> schedule_attempts{0};      ///< host add_pending_call calls made
  std::atomic<std::uint64_t> schedule_failures{0};      ///< of those, refused (returned -1)
  std::atomic<std::uint64_t> pending_calls{0};          ///< of those, accepted (returned 0)
  std::atomic<std::uint64_t> drain_cycles{0};           ///< pending calls that ran a drain
  std::atomic<std::uint64_t> pending_calls_ignored{0};  ///< pending calls that found the host dead
  std::atomic<std::uint64_t> direct_drains{0};          ///< drains run directly at an entry point
  std::atomic<std::uint64_t> retries{0};                ///< scheduling retries from entry points
  std::atomic<std::uint64_t> rearms{0};       ///< stale claims re-armed (extra pending call)
  std::atomic<std::uint64_t> main_rearms{0};  ///< of those, by the main thread past the bound
  std::atomic<std::uint64_t> leaked_at_shutdown{0};  ///< items left in the queue at the backstop
  std::atomic<std::uint64_t> leaked_finalizing{0};   ///< drains skipped: host finalizing (leak)
  std::atomic<std::uint64_t> gate_timeouts{0};       ///< shutdown gave up waiting for the gate
  std::atomic<std::uint64_t> forks{0};               ///< at-fork resets in a child
};

}  // namespace deferred_cleanup
