// SPDX-License-Identifier: Apache-2.0
// fake_host.cpp: see fake_host.hpp.
#include "fake_host.hpp"

#include <atomic>
#include <chrono>
#include <deque>
#include <random>
#include <thread>

#include "deferred_cleanup/comparison/policies.hpp"
#include "deferred_cleanup/drain.hpp"

namespace dc_test {
namespace {

namespace dc = deferred_cleanup;

struct Entry {
  dc::PendingCallFn fn;  // nullptr: a foreign call (no-op)
  void* arg;
  std::uint64_t ordinal;  // the queue's calls: order of acceptance (from 1)
};

struct State {
  std::mutex mu;  // the fake's "pending-call lock", like CPython's
  std::deque<Entry> ring;
  std::size_t capacity = 32;
  std::uint32_t refuse_per_million = 0;
  std::uint32_t lose_per_million = 0;
  unsigned lose_next = 0;
  unsigned lose_next_foreign = 0;
  std::uint64_t ours_accepted = 0;  // ordinal of the queue's last accepted call
  std::uint64_t ours_ran_max = 0;   // ordinal of the newest of them that ran
  std::mt19937_64 rng{1};
  bool closed = false;
  HostCounters c;
};

State& st() {
  static State s;
  return s;
}

// Set by tests with no producer running, or read by producers: atomics so
// that a hook or a clock change made while producers run is not a data race.
std::atomic<std::thread::id> g_main{};
std::atomic<void (*)(const void*)> g_in_gate{nullptr};
std::atomic<std::int64_t> g_clock{kClockStart};
std::atomic<bool> g_real_clock{false};
std::atomic<bool> g_finalizing{false};
std::atomic<int> g_stop_countdown{-1};  // cleanups until the drain is asked to stop; -1: never

bool is_ours(dc::PendingCallFn fn) {
  return fn == &dc::pending_call<dc::ReferencePolicy> ||
         fn == &dc::pending_call<dc::comparison::SeedPolicy> ||
         fn == &dc::pending_call<dc::comparison::CudaCore12Policy>;
}

bool fake_is_main_thread();

int fake_add_pending_call(dc::PendingCallFn fn, void* arg) {
  const bool foreign = !fake_is_main_thread();
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.closed) {
    ++s.c.after_close;
    return -1;
  }
  if (s.refuse_per_million != 0 &&
      std::uniform_int_distribution<std::uint32_t>(0, 999999)(s.rng) < s.refuse_per_million) {
    ++s.c.refused_random;
    return -1;
  }
  if (s.ring.size() >= s.capacity) {
    ++s.c.refused_full;
    return -1;
  }
  ++s.c.added;
  std::uint64_t ordinal = 0;
  if (is_ours(fn)) {
    ordinal = ++s.ours_accepted;
    const std::uint64_t unresolved = s.ours_accepted - s.ours_ran_max;
    if (unresolved > s.c.max_ours_unresolved) s.c.max_ours_unresolved = unresolved;
  }
  if (foreign && s.lose_next_foreign > 0) {
    --s.lose_next_foreign;
    ++s.c.lost;  // accepted, then lost: it never runs
    return 0;
  }
  if (s.lose_next > 0 || (s.lose_per_million != 0 && std::uniform_int_distribution<std::uint32_t>(
                                                         0, 999999)(s.rng) < s.lose_per_million)) {
    if (s.lose_next > 0) --s.lose_next;
    ++s.c.lost;  // accepted, then lost: it never runs
    return 0;
  }
  s.ring.push_back({fn, arg, ordinal});
  if (is_ours(fn)) {
    ++s.c.ours_outstanding;
    if (s.c.ours_outstanding > s.c.max_ours_outstanding) {
      s.c.max_ours_outstanding = s.c.ours_outstanding;
    }
  }
  return 0;
}

bool fake_is_main_thread() { return std::this_thread::get_id() == g_main.load(); }

void fake_in_gate(const void* q) {
  if (auto hook = g_in_gate.load()) {
    hook(q);
  }
}

std::int64_t fake_now_ns() {
  if (g_real_clock.load(std::memory_order_relaxed)) {
    return kClockStart + std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  }
  return g_clock.load();
}

bool fake_finalizing() { return g_finalizing.load(); }

bool fake_stop_drain() {
  int n = g_stop_countdown.load();
  if (n < 0) return false;
  if (--n == 0) {
    g_stop_countdown.store(-1);  // once
    return true;
  }
  g_stop_countdown.store(n);
  return false;
}

const dc::Host kHost{
    .add_pending_call = &fake_add_pending_call,
    .is_main_thread = &fake_is_main_thread,
    .in_gate = &fake_in_gate,
    .now_ns = &fake_now_ns,
    .finalizing = &fake_finalizing,
    .after_drain = nullptr,
    .stop_drain = &fake_stop_drain,
};

}  // namespace

void reset_host(std::size_t capacity, std::uint32_t refuse_per_million, std::uint64_t seed,
                std::uint32_t lose_per_million) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  s.ring.clear();
  s.capacity = capacity;
  s.refuse_per_million = refuse_per_million;
  s.lose_per_million = lose_per_million;
  s.lose_next = 0;
  s.lose_next_foreign = 0;
  s.ours_accepted = 0;
  s.ours_ran_max = 0;
  s.rng.seed(seed);
  s.closed = false;
  s.c = HostCounters{};
  g_in_gate.store(nullptr);
  g_clock.store(kClockStart);
  g_real_clock.store(false);
  g_finalizing.store(false);
  g_stop_countdown.store(-1);
}

void set_main_thread() { g_main.store(std::this_thread::get_id()); }

const dc::Host* host() { return &kHost; }

void set_in_gate_hook(void (*hook)(const void* queue)) { g_in_gate.store(hook); }

void set_rates(std::uint32_t refuse_per_million, std::uint32_t lose_per_million) {
  std::lock_guard<std::mutex> lock(st().mu);
  st().refuse_per_million = refuse_per_million;
  st().lose_per_million = lose_per_million;
}

void lose_next(unsigned n) {
  std::lock_guard<std::mutex> lock(st().mu);
  st().lose_next = n;
}

void lose_next_foreign(unsigned n) {
  std::lock_guard<std::mutex> lock(st().mu);
  st().lose_next_foreign = n;
}

void advance_clock(std::int64_t ns) { g_clock.fetch_add(ns); }

void use_real_clock() { g_real_clock.store(true); }

void set_finalizing(bool on) { g_finalizing.store(on); }

void stop_drain_after(int cleanups) { g_stop_countdown.store(cleanups); }

bool add_foreign() {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.ring.size() >= s.capacity) {
    return false;
  }
  s.ring.push_back({nullptr, nullptr, 0});
  return true;
}

bool run_one() {
  Entry e{};
  {
    State& s = st();
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.ring.empty()) {
      return false;
    }
    e = s.ring.front();
    s.ring.pop_front();
    ++s.c.ran;
    if (is_ours(e.fn)) {
      --s.c.ours_outstanding;
      if (e.ordinal > s.ours_ran_max) s.ours_ran_max = e.ordinal;  // FIFO: older ones are gone
    }
  }
  if (e.fn != nullptr) {
    e.fn(e.arg);  // outside the lock, as CPython runs pending calls
  }
  return true;
}

std::size_t run_all() {
  std::size_t n = 0;
  while (run_one()) {
    ++n;
  }
  return n;
}

void close_host() {
  std::lock_guard<std::mutex> lock(st().mu);
  st().closed = true;
}

HostCounters counters() {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  HostCounters c = s.c;
  c.queued = s.ring.size();
  return c;
}

}  // namespace dc_test
