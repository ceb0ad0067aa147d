// SPDX-License-Identifier: Apache-2.0
// fake_host.hpp: a stand-in for CPython's pending-call machinery.
//
// The core reaches its host only through `Host` (scheduling.hpp): plain
// function pointers, so the fake is process-global.  It models what the core
// relies on and what can go wrong:
//
//   * a bounded FIFO of pending calls, like CPython's ring (Python/ceval_gil.c,
//     _push_pending_call, v3.12.0: 32 slots, -1 when full, nothing evicted,
//     nothing raised).  The capacity is a knob; other users of the ring are
//     modelled by add_foreign(), which occupies a slot;
//   * refusal at random, with a chosen probability, on top of refusal when
//     full (the core must cope with -1 at any moment);
//   * a lost call: add_pending_call returns 0 and the call never runs, as on
//     3.10/3.11 when a subinterpreter holds the GIL (the probe's field
//     `subinterp.runner`; Python/ceval.c v3.11.0, bpo-10915).  lose_next()
//     loses the next N calls; lose_next_foreign() the next N calls added
//     off the main thread only (a call the main thread adds while it holds
//     the GIL goes to the main interpreter's ring, scheduling.hpp);
//     lose_per_million loses calls at random;
//   * a fake monotonic clock (now_ns), moved only by advance_clock(), so the
//     re-arm rule's stale bound is crossed exactly when a test says so;
//     use_real_clock() switches to std::chrono::steady_clock;
//   * a finalizing flag for the comparison variants (set_finalizing());
//   * "the main thread": the thread that called set_main_thread(); run_one()
//     and run_all() play the eval breaker there.
//
// It counts, under its lock, how many of the queue's own pending calls are in
// the ring (any variant's pending_call<P>) and remembers the highest count
// seen: the core promises at most one (reference: at most three after
// re-arms).  It also counts the queue's calls accepted after the newest one
// of them that ran, lost ones included: what the ring would hold if each
// loss were only a delay (FIFO), the count the re-arm bound is about.
// After close_host() any add_pending_call is a protocol violation (a call
// into CPython after teardown) and is counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "deferred_cleanup/scheduling.hpp"

namespace dc_test {

/// Configure the fake before a test: empty ring, nothing lost, clock at its
/// start, not finalizing, no hook.
///
/// Thread: the test's main thread, with no producer running.
/// @param capacity slots in the pending-call ring (CPython: 32)
/// @param refuse_per_million probability of a random refusal, per 10^6 calls
/// @param seed seed of the refusal RNG
/// @param lose_per_million probability that an accepted call is lost
void reset_host(std::size_t capacity, std::uint32_t refuse_per_million, std::uint64_t seed,
                std::uint32_t lose_per_million = 0);

/// Declare the calling thread the main thread.
void set_main_thread();

/// The Host for the core: every field set (after_drain: nullptr).
const deferred_cleanup::Host* host();

/// Install (or clear, with nullptr) the in-gate test hook.
void set_in_gate_hook(void (*hook)(const void* queue));

/// Change the random refusal and loss rates (per 10^6 calls).
void set_rates(std::uint32_t refuse_per_million, std::uint32_t lose_per_million);

/// Lose the next `n` accepted calls (they return 0 and never run).
void lose_next(unsigned n);

/// Lose the next `n` accepted calls added off the main thread; calls the
/// main thread adds are not lost by this setting.
void lose_next_foreign(unsigned n);

/// The fake clock's start value (never 0: 0 means "no claim" in the queue).
inline constexpr std::int64_t kClockStart = 1'000'000'000;

/// Move the fake clock forward.
void advance_clock(std::int64_t ns);

/// Use std::chrono::steady_clock instead of the fake clock (until reset_host).
void use_real_clock();

/// What the host's finalizing() answers.
void set_finalizing(bool on);

/// The host's stop_drain() answers true once, after the given number of
/// cleanups from now (until reset_host; never by default).
void stop_drain_after(int cleanups);

/// Occupy one slot with a foreign pending call (a no-op when run).
/// @return true if it fit
bool add_foreign();

/// Run the oldest pending call, if any, on the calling (main) thread.
/// @return true if one ran
bool run_one();

/// Run pending calls until the ring is empty (including ones added meanwhile).
/// @return how many ran
std::size_t run_all();

/// From now on every add_pending_call is a call after teardown: counted, refused.
void close_host();

/// Counters kept by the fake (snapshot).
struct HostCounters {
  std::uint64_t added = 0;                 ///< accepted add_pending_call (lost ones included)
  std::uint64_t lost = 0;                  ///< of those, lost (never queued, never run)
  std::uint64_t refused_full = 0;          ///< refused because the ring was full
  std::uint64_t refused_random = 0;        ///< refused at random
  std::uint64_t after_close = 0;           ///< calls after close_host()
  std::uint64_t ran = 0;                   ///< pending calls run
  std::uint64_t max_ours_outstanding = 0;  ///< most of the queue's calls in the ring at once
  std::uint64_t ours_outstanding = 0;      ///< the queue's calls in the ring now
  /// Most of the queue's calls at once that were accepted after the newest
  /// of them that ran (lost ones included).
  std::uint64_t max_ours_unresolved = 0;
  std::size_t queued = 0;  ///< entries in the ring now
};
HostCounters counters();

}  // namespace dc_test
