// SPDX-License-Identifier: Apache-2.0
// ring_host.hpp: a host for the benchmarks that models CPython's pending-call
// ring and nothing else.
//
// CPython keeps the pending calls of an interpreter in a fixed array guarded
// by a mutex: Py_AddPendingCall takes the lock, appends (fn, arg) and sets the
// "calls to do" flag of the eval breaker, or returns -1 when the array is full
// (Python/ceval_gil.c, _push_pending_call, v3.12.0 and v3.13.0).  The array
// holds 31 calls on 3.10-3.12 (a ring of 32 that keeps one slot empty) and 32
// on 3.13+ (a counter of up to 32): measured by the probe, recorded in
// reference/python/deferred_cleanup/cpython_facts.py (`capacity`).  The main
// thread takes one call at a time under the same lock and runs it without the
// lock (make_pending_calls).
//
// The model: a std::mutex, a ring of `capacity` entries (31 or 32), a relaxed
// atomic store of the eval-breaker flag on success, -1 when full (nothing
// evicted, nothing raised).  run_all() plays the main thread.  Refusals are
// counted.  The host is process-global because the core reaches it through
// plain function pointers; each benchmark calls reset() before it starts.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace dc_bench {

using RingFn = int (*)(void* arg);

/// CPython's pending-call array, modelled (see the file comment).
class Ring {
 public:
  /// Empty the ring and set its capacity (31 or 32; at most kSlots).
  void reset(std::size_t capacity) {
    std::lock_guard<std::mutex> lock(mu_);
    capacity_ = capacity < kSlots ? capacity : kSlots;
    first_ = 0;
    count_ = 0;
    refused_.store(0, std::memory_order_relaxed);
    added_.store(0, std::memory_order_relaxed);
    calls_to_do_.store(false, std::memory_order_relaxed);
  }

  /// Py_AddPendingCall: 0 when queued, -1 when the ring is full.
  int add(RingFn fn, void* arg) {
    std::lock_guard<std::mutex> lock(mu_);
    if (count_ == capacity_) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      return -1;
    }
    slots_[(first_ + count_) % kSlots] = Entry{fn, arg};
    ++count_;
    added_.fetch_add(1, std::memory_order_relaxed);
    calls_to_do_.store(true, std::memory_order_relaxed);  // the eval breaker's signal
    return 0;
  }

  /// The main thread's make_pending_calls: pop one call at a time under the
  /// lock, run it without the lock.  Returns the number of calls run.
  std::size_t run_all() {
    std::size_t ran = 0;
    for (;;) {
      Entry e{};
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (count_ == 0) {
          calls_to_do_.store(false, std::memory_order_relaxed);
          return ran;
        }
        e = slots_[first_];
        first_ = (first_ + 1) % kSlots;
        --count_;
      }
      e.fn(e.arg);
      ++ran;
    }
  }

  std::uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  std::uint64_t added() const { return added_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::size_t kSlots = 32;
  struct Entry {
    RingFn fn;
    void* arg;
  };
  std::mutex mu_;
  std::array<Entry, kSlots> slots_{};
  std::size_t capacity_ = 32;
  std::size_t first_ = 0;
  std::size_t count_ = 0;
  std::atomic<std::uint64_t> refused_{0};
  std::atomic<std::uint64_t> added_{0};
  std::atomic<bool> calls_to_do_{false};
};

/// The process-wide ring the benchmark hosts use.
inline Ring g_ring;

/// Host callbacks over g_ring.
inline int ring_add_pending_call(RingFn fn, void* arg) { return g_ring.add(fn, arg); }
inline bool ring_is_main_thread() {
  return false;
}  // producers in the benchmarks are driver threads
inline std::int64_t ring_now_ns() {  // the host clock (CPython's host uses the steady clock too)
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
inline bool ring_finalizing() { return false; }

}  // namespace dc_bench
