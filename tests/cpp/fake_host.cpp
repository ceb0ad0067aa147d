// fake_host.cpp: see fake_host.hpp.
#include "fake_host.hpp"

#include <atomic>
#include <deque>
#include <random>
#include <thread>

#include "deferred_cleanup/drain.hpp"

namespace dc_test {
namespace {

struct Entry {
  deferred_cleanup::PendingCallFn fn;  // nullptr: a foreign call (no-op)
  void* arg;
};

struct State {
  std::mutex mu;  // the fake's "pending-call lock", like CPython's
  std::deque<Entry> ring;
  std::size_t capacity = 32;
  std::uint32_t refuse_per_million = 0;
  std::mt19937_64 rng{1};
  bool closed = false;
  std::uint64_t ours_outstanding = 0;
  HostCounters c;
  void (*in_gate)(const deferred_cleanup::Queue&) = nullptr;
};

State& st() {
  static State s;
  return s;
}

// Written by set_main_thread() before producers start, read by any thread;
// relaxed is enough because thread creation orders it (std::thread ctor).
std::atomic<std::thread::id> g_main{};

bool is_ours(deferred_cleanup::PendingCallFn fn) { return fn == &deferred_cleanup::pending_call; }

int fake_add_pending_call(deferred_cleanup::PendingCallFn fn, void* arg) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.closed) {
    ++s.c.after_close;
    return -1;
  }
  if (s.refuse_per_million != 0 && std::uniform_int_distribution<std::uint32_t>(0, 999999)(s.rng) < s.refuse_per_million) {
    ++s.c.refused_random;
    return -1;
  }
  if (s.ring.size() >= s.capacity) {
    ++s.c.refused_full;
    return -1;
  }
  s.ring.push_back({fn, arg});
  ++s.c.added;
  if (is_ours(fn)) {
    ++s.ours_outstanding;
    if (s.ours_outstanding > s.c.max_ours_outstanding) {
      s.c.max_ours_outstanding = s.ours_outstanding;
    }
  }
  return 0;
}

bool fake_is_main_thread() { return std::this_thread::get_id() == g_main.load(std::memory_order_relaxed); }

void fake_in_gate(const deferred_cleanup::Queue& q) {
  auto hook = st().in_gate;  // set before producers start
  if (hook != nullptr) {
    hook(q);
  }
}

const deferred_cleanup::Host kHost{&fake_add_pending_call, &fake_is_main_thread, &fake_in_gate};

}  // namespace

void reset_host(std::size_t capacity, std::uint32_t refuse_per_million, std::uint64_t seed) {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  s.ring.clear();
  s.capacity = capacity;
  s.refuse_per_million = refuse_per_million;
  s.rng.seed(seed);
  s.closed = false;
  s.ours_outstanding = 0;
  s.c = HostCounters{};
  s.in_gate = nullptr;
}

void set_main_thread() { g_main.store(std::this_thread::get_id(), std::memory_order_relaxed); }

const deferred_cleanup::Host* host() { return &kHost; }

void set_in_gate_hook(void (*hook)(const deferred_cleanup::Queue&)) {
  std::lock_guard<std::mutex> lock(st().mu);
  st().in_gate = hook;
}

bool add_foreign() {
  State& s = st();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.ring.size() >= s.capacity) {
    return false;
  }
  s.ring.push_back({nullptr, nullptr});
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
      --s.ours_outstanding;
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
