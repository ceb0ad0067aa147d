// SPDX-License-Identifier: Apache-2.0
// lost_wakeup.cpp: the lost wakeup of the comparison variants, on the real
// hardware, with the real queue code.
//
// Two threads, each pinned to its own CPU when the machine allows it:
//
//   producer (main thread)  for i in 0..N: on_user_object_destroyed(q, item),
//                           then wait until the item's cleanup has run;
//   consumer                polls a flag, the fake host's "pending call": when
//                           set, runs the variant's real pending_call<P>(&q).
//
// The producer pushes the next item as soon as it sees the cleanup of the
// previous one, which the consumer runs inside its drain, just before the
// drain's last (empty) take, its clear of scheduled_ and (comparison variants)
// its re-check of head_.  So every handoff races the drain's clear-and-recheck.
//
// The comparison variants compile, on x86-64, to `xchg` (the take), a plain
// `movb $0` (the release clear) and a plain `mov` (the acquire re-check) with
// no fence in between.  x86-TSO lets the clear wait in the consumer's store
// buffer while the re-check reads head_ before the producer's push reached
// it, and the producer's locked CAS on scheduled_ meanwhile reads the old
// `true`: neither side schedules.  The item then sits in the queue with
// scheduled_ false, no pending call outstanding and the consumer idle: a
// stuck state.  The producer counts it as one lost wakeup once it has waited
// past a short bound and seen all four conditions, then recovers by asking
// the consumer for a drain (the real drain_all), and goes on.
//
// The reference clears scheduled_ with a seq_cst store (`xchg`, or `mov` +
// `mfence`) before its take, and its producer pushes and checks with seq_cst:
// the same harness exercises its own handshake and must find no stuck state.
//
// Also checked on every handoff: the cleanup ran exactly once and on the
// consumer thread; the queue never had two pending calls outstanding; no
// stuck state with scheduled_ true (a hang of another kind).  Any of these
// makes the program exit 1.
//
// Usage:
//   lost_wakeup [--variant reference|seed|cuda-core-1.2|cuda-core-1.2-fixed|all] [--iterations N]
//               [--stop-at-first] [--json PATH] [--no-pin]
// Prints one line per variant:
//   lost-wakeup: variant=<v> iterations=<n> lost=<k> rate=<k/n> seconds=<s> ...
// With --stop-at-first a variant stops at its first lost wakeup (the line
// then reports the handoffs run so far).  --json writes the machine, the
// compiler and the counts.  Exit status: 0, or 1 on a violation.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "deferred_cleanup/callback.hpp"
#include "deferred_cleanup/drain.hpp"
#include "deferred_cleanup/comparison/policies.hpp"
#include "deferred_cleanup/policy.hpp"
#include "deferred_cleanup/queue.hpp"
#include "deferred_cleanup/scheduling.hpp"
#include "race_harness.hpp"

namespace dc = deferred_cleanup;

namespace {

using race_harness::cpu_relax;
using race_harness::pin;

// ---------------------------------------------------------------- the host
// "Pending call" = a counter the consumer polls.  At most one of the queue's
// calls may be outstanding; g_max_calls records the most seen.
std::atomic<int> g_calls{0};
std::atomic<int> g_max_calls{0};
std::atomic<dc::PendingCallFn> g_fn{nullptr};
std::atomic<void*> g_arg{nullptr};
std::atomic<bool> g_busy{false};     // the consumer is inside a pending call or a drain
std::atomic<bool> g_recover{false};  // the producer asks the consumer for a drain
std::atomic<bool> g_stop{false};
std::thread::id g_consumer_id;  // written before the consumer starts

int poll_add_pending_call(dc::PendingCallFn fn, void* arg) {
  g_fn.store(fn, std::memory_order_relaxed);
  g_arg.store(arg, std::memory_order_relaxed);
  const int n = g_calls.fetch_add(1, std::memory_order_release) + 1;  // read by the consumer
  int m = g_max_calls.load(std::memory_order_relaxed);
  while (n > m && !g_max_calls.compare_exchange_weak(m, n, std::memory_order_relaxed)) {
  }
  return 0;
}

bool consumer_is_main() { return std::this_thread::get_id() == g_consumer_id; }

const dc::Host kPollHost{
    .add_pending_call = &poll_add_pending_call,
    .is_main_thread = &consumer_is_main,
    .in_gate = nullptr,
    .now_ns = nullptr,  // no clock: no claim looks stale, no re-arm
    .finalizing = nullptr,
    .after_drain = nullptr,
};

// ------------------------------------------------------------- the payload
std::atomic<std::uint64_t> g_cleaned{0};
std::atomic<std::uint64_t> g_off_thread{0};

void cleanup(void*) noexcept {
  if (std::this_thread::get_id() != g_consumer_id) {
    g_off_thread.fetch_add(1, std::memory_order_relaxed);
  }
  g_cleaned.fetch_add(1, std::memory_order_release);  // the producer waits for it
}

// The producer path and the drain as their own symbols, so that tools/disasm.py
// finds them with `nm -C`.  Each only calls the real function.
template <class P>
__attribute__((noinline)) dc::ScheduleResult produce(dc::BasicQueue<P>& q,
                                                     dc::DeferredCleanupItem* item) {
  return dc::on_user_object_destroyed(q, item);
}

struct Result {
  const char* variant = "";
  std::uint64_t iterations = 0;
  std::uint64_t lost = 0;
  std::uint64_t first_lost_at = 0;  // handoff index of the first witness, 1-based; 0 if none
  std::uint64_t double_clean = 0;
  std::uint64_t off_thread = 0;
  std::uint64_t stuck_scheduled = 0;
  int max_calls = 0;
  double seconds = 0;
  bool pinned = false;
};

// Spins of the producer before it looks for a stuck state.
constexpr std::uint64_t kShortBound = 2000;
// Seconds with the item not cleaned and no progress before the producer
// reports a stuck state of another kind (scheduled_ true, nothing outstanding).
constexpr double kHangSeconds = 2.0;

template <class P>
Result run(std::uint64_t iterations, bool stop_at_first, bool want_pin, int cpu_a, int cpu_b) {
  Result r;
  r.variant = P::name;
  auto* q = new dc::BasicQueue<P>(&kPollHost);  // never freed, as the real queue
  g_calls.store(0);
  g_max_calls.store(0);
  g_busy.store(false);
  g_recover.store(false);
  g_stop.store(false);
  g_cleaned.store(0);
  g_off_thread.store(0);

  std::thread consumer([q] {
    for (;;) {
      if (g_calls.load(std::memory_order_acquire) > 0) {
        g_busy.store(true, std::memory_order_seq_cst);
        g_calls.fetch_sub(1, std::memory_order_seq_cst);
        g_fn.load(std::memory_order_relaxed)(g_arg.load(std::memory_order_relaxed));
        g_busy.store(false, std::memory_order_seq_cst);
      } else if (g_recover.load(std::memory_order_acquire)) {
        g_busy.store(true, std::memory_order_seq_cst);
        dc::drain_all(*q);  // recovery: what a later wakeup would do
        g_recover.store(false, std::memory_order_seq_cst);
        g_busy.store(false, std::memory_order_seq_cst);
      } else if (g_stop.load(std::memory_order_acquire)) {
        return;
      } else {
        cpu_relax();
      }
    }
  });
  g_consumer_id = consumer.get_id();  // before any item: cleanups compare to it
  // (the consumer reads g_consumer_id only inside cleanups, which start after
  // the first produce() below; thread creation and the first release of
  // g_calls order the write before those reads)
  if (want_pin) {
    r.pinned = pin(pthread_self(), cpu_a) && pin(consumer.native_handle(), cpu_b);
  }

  dc::DeferredCleanupItem item;
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t i = 0;
  for (; i < iterations; ++i) {
    dc::init_item(item, nullptr, &cleanup);
    produce(*q, &item);
    std::uint64_t spins = 0;
    auto wait_start = std::chrono::steady_clock::time_point{};
    for (;;) {
      const std::uint64_t c = g_cleaned.load(std::memory_order_acquire);
      if (c != i) {
        if (c > i + 1) ++r.double_clean;
        break;
      }
      if (++spins < kShortBound) {
        cpu_relax();
        continue;
      }
      // Stuck?  Read in this order: outstanding calls, consumer busy, then the
      // queue.  A zero count read after the consumer's decrement and a false
      // `busy` read after its last store mean its pending call has returned.
      const bool no_call = g_calls.load(std::memory_order_seq_cst) == 0;
      const bool idle = no_call && !g_busy.load(std::memory_order_seq_cst) &&
                        !g_recover.load(std::memory_order_seq_cst);
      if (idle && g_cleaned.load(std::memory_order_acquire) == i && !q->empty_snapshot()) {
        if (!q->scheduled_snapshot()) {
          // Item queued, scheduled_ false, no call outstanding, consumer idle.
          ++r.lost;
          if (r.first_lost_at == 0) r.first_lost_at = i + 1;
          g_recover.store(true, std::memory_order_seq_cst);
          continue;
        }
        if (wait_start == std::chrono::steady_clock::time_point{}) {
          wait_start = std::chrono::steady_clock::now();
        } else if (std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start)
                       .count() > kHangSeconds) {
          ++r.stuck_scheduled;  // scheduled_ true and nothing will ever run
          g_recover.store(true, std::memory_order_seq_cst);
          wait_start = {};
          continue;
        }
      }
      spins = kShortBound / 2;  // keep the queue's cache lines quiet between looks
      std::this_thread::yield();
    }
    if (stop_at_first && r.lost > 0) {
      ++i;
      break;
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.iterations = i;
  g_stop.store(true, std::memory_order_release);
  consumer.join();
  r.off_thread = g_off_thread.load();
  r.max_calls = g_max_calls.load();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string variant = "all";
  std::uint64_t iterations = 2'000'000;
  bool stop_at_first = false;
  bool want_pin = true;
  std::string json;
  for (int a = 1; a < argc; ++a) {
    const std::string s = argv[a];
    if (s == "--variant" && a + 1 < argc) {
      variant = argv[++a];
    } else if (s == "--iterations" && a + 1 < argc) {
      iterations = std::strtoull(argv[++a], nullptr, 10);
    } else if (s == "--stop-at-first") {
      stop_at_first = true;
    } else if (s == "--json" && a + 1 < argc) {
      json = argv[++a];
    } else if (s == "--no-pin") {
      want_pin = false;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--variant reference|seed|cuda-core-1.2|cuda-core-1.2-fixed|all] "
                   "[--iterations N] "
                   "[--stop-at-first] [--json PATH] [--no-pin]\n",
                   argv[0]);
      return 2;
    }
  }
  // Two distinct CPUs of our affinity mask.
  const race_harness::CpuPair cpus = race_harness::two_cpus();
  want_pin = want_pin && cpus.second >= 0;

  std::vector<Result> results;
  auto go = [&](auto tag) {
    using P = decltype(tag);
    if (variant == "all" || variant == P::name) {
      results.push_back(run<P>(iterations, stop_at_first, want_pin, cpus.first, cpus.second));
    }
  };
  go(dc::comparison::CudaCore12Policy{});
  go(dc::comparison::CudaCore12FixedPolicy{});
  go(dc::comparison::SeedPolicy{});
  go(dc::ReferencePolicy{});
  if (results.empty()) {
    std::fprintf(
        stderr, "unknown variant '%s' (reference, seed, cuda-core-1.2, cuda-core-1.2-fixed, all)\n",
        variant.c_str());
    return 2;
  }

  bool bad = false;
  for (const Result& r : results) {
    std::printf(
        "lost-wakeup: variant=%s iterations=%llu lost=%llu rate=%.3g seconds=%.2f "
        "first_lost_at=%llu pinned=%s double_clean=%llu off_thread=%llu "
        "max_outstanding=%d stuck_scheduled=%llu\n",
        r.variant, (unsigned long long)r.iterations, (unsigned long long)r.lost,
        r.iterations ? double(r.lost) / double(r.iterations) : 0.0, r.seconds,
        (unsigned long long)r.first_lost_at, r.pinned ? "yes" : "no",
        (unsigned long long)r.double_clean, (unsigned long long)r.off_thread, r.max_calls,
        (unsigned long long)r.stuck_scheduled);
    bad = bad || r.double_clean || r.off_thread || r.max_calls > 1 || r.stuck_scheduled;
  }
  std::fflush(stdout);

  if (!json.empty()) {
    std::ofstream o(json);
    race_harness::write_machine_fields(o, "tests/cpp/lost_wakeup.cpp", stop_at_first);
    o << "  \"variants\": [\n";
    for (std::size_t k = 0; k < results.size(); ++k) {
      const Result& r = results[k];
      o << "    {\"variant\": \"" << r.variant << "\", \"iterations\": " << r.iterations
        << ", \"lost\": " << r.lost << ", \"seconds\": " << r.seconds
        << ", \"pinned\": " << (r.pinned ? "true" : "false")
        << ", \"double_clean\": " << r.double_clean << ", \"off_thread\": " << r.off_thread
        << ", \"max_outstanding\": " << r.max_calls
        << ", \"stuck_scheduled\": " << r.stuck_scheduled << "}"
        << (k + 1 < results.size() ? ",\n" : "\n");
    }
    o << "  ]\n}\n";
  }
  return bad ? 1 : 0;
}
