// SPDX-License-Identifier: Apache-2.0
// bench_core.cpp: Google Benchmark microbenchmarks of the core, against the
// physical floor and the shapes other projects use.  Built by
// tests/bench/CMakeLists.txt; run by `make bench` (tools/bench.py), and once
// per benchmark with DC_BENCH_SMOKE=1 by `make test` (tests/test_bench.py).
//
// Rows (names are what tools/bench.py reads; keep them stable):
//
//   floor/treiber_push                  one CAS (release) of the same item type
//   destructor/<variant>/outstanding    the destructor path (push + schedule)
//                                       with a pending call already outstanding
//   mutex_vector/outstanding            std::mutex + std::vector queue with a
//                                       coalesced wake flag, wake already set
//   naive/per_payload/<31|32>           one host call per payload into a ring
//                                       of 31/32 slots; counts refusals
//   batch16/...                         16 operations between two clock reads,
//                                       the state reset untimed in between: the
//                                       rows that need a reset after each
//                                       operation (no call outstanding), and
//                                       the floor measured the same way
//   clock/steady_clock_pair             what those two clock reads cost
//   drain/<variant>/<N>, direct/<N>     the consumer: the host's pending call
//                                       draining N queued items, versus
//                                       running the same N cleanups directly
//   floor/drain/<N>                     the drain's floor: take the same
//                                       intrusive list with one exchange and
//                                       walk it once, calling the same cleanup
//   floor/drain_reversed/<N>            the same, reversed first (oldest first,
//                                       the order the queue promises)
//   drain/mutex_vector/<N>              the mutex + vector queue's pending call
//                                       draining N items (N: 10^2 to 10^7 for
//                                       every drain, direct and floor row)
//   mt/<shape>/threads:<T>              T producer threads pushing at once into
//                                       one queue, a call outstanding
//   paired/mt/destructor/<v>/threads:<T>  the same for a variant or ablation,
//                                       each iteration also timing the bare
//                                       Treiber push back to back (counter
//                                       floor_ratio: BM_ProducersPaired)
//   destructor/<ablation>/outstanding,  the slow-path breakdown: the two
//   batch16/destructor/<ablation>/none  destructor rows of the reference with
//                                       one switch off (variants.hpp,
//                                       DC_BENCH_ABLATIONS), and of
//                                       cuda-core-1.2-fixed
//   mt/destructor/<ablation>/threads:1  the one-producer breakdown: one
//   destructor/<ablation>/outstanding   producer's throughput and the fast
//                                       path of the reference with one piece
//                                       weakened or removed (variants.hpp,
//                                       DC_BENCH_ONE_PRODUCER_ABLATIONS, and
//                                       reference-no-rearm)
//
// The binary bench_core_shared_line is the same file built with
// DC_QUEUE_FIELD_ALIGN=8 (queue.hpp): head_, scheduled_ and the gate share
// one cache line there.  Its rows carry the prefix "shared_line/".
//
// Every queue row calls the real headers (variants.hpp).  The host is the
// ring model of ring_host.hpp.  Allocations are counted by replacing the
// global operator new: the queue rows must show none.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "ring_host.hpp"
#include "variants.hpp"

// ------------------------------------------------------------ allocation count
// alloc_count.cpp replaces the global operator new and counts each call.
extern std::atomic<std::uint64_t> g_allocations;

#ifndef DC_BENCH_PREFIX
#define DC_BENCH_PREFIX ""
#endif

namespace dc_bench {
namespace {

/// Producer counts of the mt/ rows (a 16-core machine is the target).
const std::vector<std::int64_t> kThreadCounts{1, 2, 4, 8, 12, 16};

/// A row name with the binary's prefix (see the file comment).
std::string row(const std::string& name) { return DC_BENCH_PREFIX + name; }

bool g_smoke = false;                  // DC_BENCH_SMOKE=1: each benchmark once, small sizes
int g_headline_reps = 0;               // DC_BENCH_HEADLINE_REPS: see headline_reps()
constexpr std::size_t kWindow = 4096;  // items cycled through by the single-producer rows
constexpr int kBatch = 16;             // operations per timed batch (below the ring's 31)

std::uint64_t g_cleaned = 0;  // the cleanups' effect (main thread only)
void count_cleanup(void* payload) noexcept { ++*static_cast<std::uint64_t*>(payload); }

void init_items(std::vector<Item>& items) {
  for (Item& it : items) {
    it.payload = &g_cleaned;
    it.cleanup = &count_cleanup;
    it.next = nullptr;
  }
}

// ------------------------------------------------------------ the floor
/// A bare Treiber stack push: one CAS with release order, nothing else.
struct Treiber {
  std::atomic<Item*> head{nullptr};
  void push(Item* item) noexcept {
    Item* expected = head.load(std::memory_order_relaxed);
    do {
      item->next = expected;
    } while (!head.compare_exchange_weak(expected, item, std::memory_order_release,
                                         std::memory_order_relaxed));
  }
  void reset() noexcept { head.store(nullptr, std::memory_order_relaxed); }
};

// ------------------------------------------------------------ mutex + vector
/// The shape greenlet and JAX use: a locked vector and a wake flag, so that
/// only the producer that finds the flag clear asks the host for a call.
struct MutexVector {
  std::mutex mu;
  std::vector<Item*> items;
  bool wake_pending = false;
  static int pending_call(void* self) {
    static_cast<MutexVector*>(self)->drain();
    return 0;
  }
  void push(Item* item) {
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu);
      items.push_back(item);
      wake = !wake_pending;
      wake_pending = true;
    }
    if (wake && ring_add_pending_call(&MutexVector::pending_call, this) != 0) {
      std::lock_guard<std::mutex> lock(mu);
      wake_pending = false;  // refused: the next producer tries again
    }
  }
  std::size_t drain() {
    std::vector<Item*> taken;
    {
      std::lock_guard<std::mutex> lock(mu);
      taken.swap(items);
      wake_pending = false;
    }
    for (Item* it : taken) it->cleanup(it->payload);
    const std::size_t n = taken.size();
    std::lock_guard<std::mutex> lock(mu);
    if (items.empty()) {  // give the storage back, as a long-lived queue would keep it
      taken.clear();
      items.swap(taken);
    }
    return n;
  }
};

// ------------------------------------------------------------ naive
/// One host call per payload: the destructor hands its own item to the host.
int run_one_item(void* item) {
  Item* it = static_cast<Item*>(item);
  it->cleanup(it->payload);
  return 0;
}

// ============================================================ single producer
void BM_TreiberPush(benchmark::State& state) {
  std::vector<Item> items(kWindow);
  init_items(items);
  Treiber q;
  std::size_t i = 0;
  const std::uint64_t a0 = g_allocations.load();
  for (auto _ : state) {
    q.push(&items[i]);
    if (++i == kWindow) {
      state.PauseTiming();
      q.reset();
      i = 0;
      state.ResumeTiming();
    }
  }
  state.counters["allocations"] = static_cast<double>(g_allocations.load() - a0);
  state.SetItemsProcessed(state.iterations());
}

template <class V>
void BM_DestructorOutstanding(benchmark::State& state) {
  g_ring.reset(32);
  std::vector<Item> items(kWindow);
  init_items(items);
  auto q = V::make();
  Item first{&g_cleaned, &count_cleanup, nullptr};
  // The real hand-off schedules the one pending call (also for the push-only
  // row, whose destroyed() never does); it stays outstanding.
  core::on_user_object_destroyed(*q, &first);
  if (g_ring.added() != 1) {
    state.SkipWithError("the first destructor did not schedule a pending call");
    return;
  }
  std::size_t i = 0;
  const std::uint64_t a0 = g_allocations.load();
  for (auto _ : state) {
    V::destroyed(*q, &items[i]);
    if (++i == kWindow) {
      state.PauseTiming();
      V::drain(*q);  // does not clear the scheduled flag: the call stays outstanding
      i = 0;
      state.ResumeTiming();
    }
  }
  state.counters["allocations"] = static_cast<double>(g_allocations.load() - a0);
  state.counters["host_calls"] = static_cast<double>(g_ring.added());
  g_ring.run_all();
  V::drain(*q);
  state.SetItemsProcessed(state.iterations());
}

void BM_MutexVectorOutstanding(benchmark::State& state) {
  g_ring.reset(32);
  std::vector<Item> items(kWindow);
  init_items(items);
  MutexVector q;
  q.items.reserve(kWindow + 1);
  Item first{&g_cleaned, &count_cleanup, nullptr};
  q.push(&first);  // sets the wake flag and makes the one pending call
  std::size_t i = 0;
  const std::uint64_t a0 = g_allocations.load();
  for (auto _ : state) {
    q.push(&items[i]);
    if (++i == kWindow) {
      state.PauseTiming();
      {
        std::lock_guard<std::mutex> lock(q.mu);
        q.items.clear();  // keep capacity and the wake flag: the call stays outstanding
      }
      i = 0;
      state.ResumeTiming();
    }
  }
  state.counters["allocations"] = static_cast<double>(g_allocations.load() - a0);
  state.counters["host_calls"] = static_cast<double>(g_ring.added());
  g_ring.reset(32);
  state.SetItemsProcessed(state.iterations());
}

/// One host call per payload, from one producer, in bursts of 1000 while the
/// main thread runs nothing: counts what the ring refuses (arg: capacity).
void BM_NaivePerPayload(benchmark::State& state) {
  const auto capacity = static_cast<std::size_t>(state.range(0));
  constexpr std::size_t kBurst = 1000;
  g_ring.reset(capacity);
  std::vector<Item> items(kBurst);
  init_items(items);
  std::size_t i = 0;
  std::uint64_t bursts = 0;
  std::uint64_t refused = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(ring_add_pending_call(&run_one_item, &items[i]));
    if (++i == kBurst) {
      state.PauseTiming();
      refused += g_ring.refused();
      ++bursts;
      g_ring.run_all();
      g_ring.reset(capacity);
      i = 0;
      state.ResumeTiming();
    }
  }
  g_ring.run_all();
  state.counters["burst"] = static_cast<double>(kBurst);
  state.counters["refused_per_burst"] =
      bursts ? static_cast<double>(refused) / static_cast<double>(bursts) : -1.0;
  state.SetItemsProcessed(state.iterations());
}

// ------------------------------------------------------------ batches of 16
using Clock = std::chrono::steady_clock;

template <class Op, class Reset>
void timed_batches(benchmark::State& state, Op op, Reset reset) {
  for (auto _ : state) {
    const auto t0 = Clock::now();
    for (int k = 0; k < kBatch; ++k) op(k);
    const auto t1 = Clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    reset();
  }
  state.counters["batch"] = kBatch;
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void BM_ClockPair(benchmark::State& state) {
  timed_batches(
      state, [](int) {}, [] {});
}

void BM_Batch16Treiber(benchmark::State& state) {
  std::vector<Item> items(kBatch);
  init_items(items);
  Treiber q;
  timed_batches(
      state, [&](int k) { q.push(&items[k]); }, [&] { q.reset(); });
}

/// The destructor path when no pending call is outstanding: 16 queues, one
/// destructor each, so each claims and calls the host; the host then runs the
/// 16 pending calls (untimed), which drain and clear the flags.
template <class V>
void BM_Batch16DestructorNone(benchmark::State& state) {
  g_ring.reset(32);
  std::vector<Item> items(kBatch);
  init_items(items);
  std::vector<std::unique_ptr<typename V::Queue>> queues;
  for (int k = 0; k < kBatch; ++k) queues.push_back(V::make());
  timed_batches(
      state, [&](int k) { V::destroyed(*queues[k], &items[k]); },
      [&] {
        if (g_ring.run_all() != kBatch) state.SkipWithError("a destructor made no pending call");
      });
  state.counters["host_calls_per_op"] =
      static_cast<double>(g_ring.added()) / static_cast<double>(state.iterations() * kBatch);
}

void BM_Batch16MutexVectorNone(benchmark::State& state) {
  g_ring.reset(32);
  std::vector<Item> items(kBatch);
  init_items(items);
  std::vector<std::unique_ptr<MutexVector>> queues;
  for (int k = 0; k < kBatch; ++k) {
    queues.push_back(std::make_unique<MutexVector>());
    queues.back()->items.reserve(4);
  }
  timed_batches(
      state, [&](int k) { queues[k]->push(&items[k]); }, [&] { g_ring.run_all(); });
}

void BM_Batch16Naive(benchmark::State& state) {
  g_ring.reset(32);
  std::vector<Item> items(kBatch);
  init_items(items);
  timed_batches(
      state, [&](int k) { ring_add_pending_call(&run_one_item, &items[k]); },
      [&] { g_ring.run_all(); });
}

// ------------------------------------------------------------ the consumer
/// The drain sizes N: 10^2 to 10^7, the curve of the Performance page (10^3,
/// 10^5 and 10^7 are the headline's); the smoke run keeps 10^3 and 10^5.
std::vector<std::int64_t> drain_sizes() {
  if (g_smoke) return {1000, 100000};
  return {100, 1000, 10000, 100000, 1000000, 10000000};
}

/// Fixed iteration counts of the drain rows: each item is pushed untimed
/// before every iteration, so a size's count bounds its run time.
void drain_iterations(benchmark::internal::Benchmark* b, std::int64_t n) {
  if (!g_smoke) b->Iterations(n >= 10000000 ? 3 : n >= 1000000 ? 10 : n >= 100000 ? 100 : 3000);
}

/// The host's pending call draining N items queued behind one outstanding
/// call (arg: N).  Manual time: only the pending call is timed.
template <class V>
void BM_Drain(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  g_ring.reset(32);
  std::vector<Item> items(n);
  auto q = V::make();
  std::uint64_t alloc_in_push = 0;
  std::uint64_t alloc_in_drain = 0;
  for (auto _ : state) {
    init_items(items);
    g_cleaned = 0;
    const std::uint64_t a0 = g_allocations.load();
    for (Item& it : items) V::destroyed(*q, &it);
    const std::uint64_t a1 = g_allocations.load();
    const auto t0 = Clock::now();
    V::pending_call(*q);
    const auto t1 = Clock::now();
    alloc_in_push += a1 - a0;
    alloc_in_drain += g_allocations.load() - a1;
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    if (g_cleaned != n) state.SkipWithError("the drain did not run every cleanup");
    g_ring.reset(32);  // the call the first push made was run by hand above
  }
  state.counters["items"] = static_cast<double>(n);
  state.counters["allocations_push"] = static_cast<double>(alloc_in_push);
  state.counters["allocations_drain"] = static_cast<double>(alloc_in_drain);
  state.counters["bytes_per_item"] = sizeof(Item);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}

/// The mutex + vector queue's pending call draining N items queued behind
/// its one call (arg: N).  The vector keeps its capacity from one iteration to
/// the next, as a long-lived queue would.  ``bytes_per_item``: the item's
/// payload and cleanup (the vector holds a pointer to the item, which needs
/// no link) plus the vector's slots per item at that point.
void BM_DrainMutexVector(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  g_ring.reset(32);
  std::vector<Item> items(n);
  MutexVector q;
  double bytes = 0;
  for (auto _ : state) {
    init_items(items);
    g_cleaned = 0;
    for (Item& it : items) q.push(&it);
    bytes = 2.0 * sizeof(void*) +
            static_cast<double>(q.items.capacity() * sizeof(Item*)) / static_cast<double>(n);
    const auto t0 = Clock::now();
    MutexVector::pending_call(&q);
    const auto t1 = Clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    if (g_cleaned != n) state.SkipWithError("the drain did not run every cleanup");
    g_ring.reset(32);  // the call the first push made was run by hand above
  }
  state.counters["items"] = static_cast<double>(n);
  state.counters["bytes_per_item"] = bytes;
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}

/// The same N cleanups run directly on the main thread, in the order the
/// drain runs them (arg: N).
void BM_Direct(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<Item> items(n);
  for (auto _ : state) {
    init_items(items);
    g_cleaned = 0;
    const auto t0 = Clock::now();
    for (Item& it : items) it.cleanup(it.payload);
    const auto t1 = Clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    if (g_cleaned != n) state.SkipWithError("not every cleanup ran");
  }
  state.counters["items"] = static_cast<double>(n);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}

/// The drain's floor (arg: N): the N items pushed onto a bare Treiber stack
/// (untimed), then the list taken with one exchange and walked once, each
/// `next` read before the cleanup runs, as the drain does; with `reverse`,
/// the taken list is first reversed to oldest first, as take_all() does.
template <bool reverse>
void BM_DrainFloor(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<Item> items(n);
  Treiber q;
  for (auto _ : state) {
    init_items(items);
    g_cleaned = 0;
    for (Item& it : items) q.push(&it);
    const auto t0 = Clock::now();
    Item* list = q.head.exchange(nullptr, std::memory_order_acquire);
    if constexpr (reverse) {
      Item* fifo = nullptr;
      while (list != nullptr) {
        Item* next = list->next;
        list->next = fifo;
        fifo = list;
        list = next;
      }
      list = fifo;
    }
    while (list != nullptr) {
      Item* next = list->next;
      list->cleanup(list->payload);
      list = next;
    }
    const auto t1 = Clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    if (g_cleaned != n) state.SkipWithError("the floor did not run every cleanup");
  }
  state.counters["items"] = static_cast<double>(n);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}

// ------------------------------------------------------------ producer threads
// T threads (arg) each push M items into one shared queue, a pending call
// already outstanding.  Timed by hand: from the moment every thread is ready
// and released at once to the moment the last one finished its M-th push, so
// the throughput is items per second of wall time, however the T threads are
// spread over the cores.  Thread creation and the drain are not timed.
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

struct TreiberShape {
  Treiber q;
  explicit TreiberShape(std::size_t) {}
  void push(Item* it) { q.push(it); }
};

struct MutexVectorShape {
  Item first{&g_cleaned, &count_cleanup, nullptr};
  MutexVector q;
  explicit MutexVectorShape(std::size_t total) {
    q.items.reserve(total + 1);  // favours this shape: it never reallocates while timed
    q.push(&first);              // sets the wake flag and makes the one pending call
  }
  void push(Item* it) { q.push(it); }
};

template <class V>
struct DestructorShape {
  Item first{&g_cleaned, &count_cleanup, nullptr};
  std::unique_ptr<typename V::Queue> q = V::make();
  // One call outstanding, made by the real hand-off (as in
  // BM_DestructorOutstanding).
  explicit DestructorShape(std::size_t) { core::on_user_object_destroyed(*q, &first); }
  void push(Item* it) { V::destroyed(*q, it); }
  ~DestructorShape() { g_ring.run_all(); }  // the outstanding call drains every item
};

/// One timed run of the producer rows: every thread of `items` pushes its
/// items into one fresh Shape at once; returns the nanoseconds from the
/// start signal to the last producer's end and adds the host calls made to
/// *host_calls.  The producers wait for the signal spinning (with a yield),
/// not on a futex: a futex wake-up wakes the threads one after another, tens
/// of microseconds apart on a virtual machine, against a run of about a
/// millisecond at one producer.
template <class Shape>
std::int64_t run_producers(std::vector<std::vector<Item>>& items, std::uint64_t* host_calls) {
  const std::size_t nthreads = items.size();
  for (auto& v : items) init_items(v);
  g_ring.reset(32);
  std::int64_t elapsed = 0;
  {
    Shape shape(nthreads * items[0].size());
    std::atomic<std::size_t> ready{0};
    std::atomic<bool> go{false};
    std::atomic<std::int64_t> last_end{0};
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < nthreads; ++t) {
      threads.emplace_back([&, t] {
        ready.fetch_add(1, std::memory_order_acq_rel);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        for (Item& it : items[t]) shape.push(&it);
        const std::int64_t end = now_ns();
        std::int64_t seen = last_end.load(std::memory_order_relaxed);
        while (seen < end &&
               !last_end.compare_exchange_weak(seen, end, std::memory_order_relaxed)) {
        }
      });
    }
    while (ready.load(std::memory_order_acquire) != nthreads) std::this_thread::yield();
    const std::int64_t t0 = now_ns();
    go.store(true, std::memory_order_release);
    for (auto& th : threads) th.join();
    elapsed = last_end.load() - t0;
    *host_calls += g_ring.added();
  }
  g_ring.reset(32);
  return elapsed;
}

/// The items of one producer row: `nthreads` threads, 2^16 items each (1000
/// in the smoke run).
std::vector<std::vector<Item>> producer_items(const benchmark::State& state) {
  const auto nthreads = static_cast<std::size_t>(state.range(0));
  const std::size_t per_thread = g_smoke ? 1000 : (1u << 16);
  return std::vector<std::vector<Item>>(nthreads, std::vector<Item>(per_thread));
}

template <class Shape>
void BM_Producers(benchmark::State& state) {
  auto items = producer_items(state);
  std::uint64_t host_calls = 0;
  for (auto _ : state) {
    state.SetIterationTime(static_cast<double>(run_producers<Shape>(items, &host_calls)) * 1e-9);
  }
  state.counters["threads"] = static_cast<double>(items.size());
  state.counters["host_calls_per_run"] =
      static_cast<double>(host_calls) / static_cast<double>(state.iterations());
  state.SetItemsProcessed(state.iterations() *
                          static_cast<std::int64_t>(items.size() * items[0].size()));
}

/// The paired producer row (paired/mt/destructor/<v>/threads:<T>): each
/// iteration times one run of Shape and one run of the bare Treiber push
/// with the same threads and items, back to back, the floor first in every
/// other iteration.  Its time is Shape's; the counter floor_ratio is the
/// median over the iterations of floor time / Shape time, Shape's
/// throughput as a fraction of the floor's measured a few milliseconds
/// apart, so that a drift of the machine between the separate mt/ rows
/// (minutes apart in one run) does not enter the ratio.
template <class Shape>
void BM_ProducersPaired(benchmark::State& state) {
  auto items = producer_items(state);
  std::uint64_t host_calls = 0, floor_calls = 0;
  std::vector<double> ratios;
  for (auto _ : state) {
    const bool floor_first = ratios.size() % 2 == 0;
    std::int64_t floor_ns = 0;
    if (floor_first) floor_ns = run_producers<TreiberShape>(items, &floor_calls);
    const std::int64_t ns = run_producers<Shape>(items, &host_calls);
    if (!floor_first) floor_ns = run_producers<TreiberShape>(items, &floor_calls);
    state.SetIterationTime(static_cast<double>(ns) * 1e-9);
    ratios.push_back(static_cast<double>(floor_ns) / static_cast<double>(ns));
  }
  std::sort(ratios.begin(), ratios.end());
  const std::size_t n = ratios.size();
  state.counters["floor_ratio"] =
      n % 2 == 1 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
  state.counters["threads"] = static_cast<double>(items.size());
  state.counters["host_calls_per_run"] =
      static_cast<double>(host_calls) / static_cast<double>(state.iterations());
  state.SetItemsProcessed(state.iterations() *
                          static_cast<std::int64_t>(items.size() * items[0].size()));
}

// ------------------------------------------------------------ registration
/// The repetitions of the single-producer destructor rows, their floors and
/// the clock pair (the fast- and slow-path headline rows and the slow-path
/// breakdown): DC_BENCH_HEADLINE_REPS when set (a row's own count overrides
/// --benchmark_repetitions), so these cheap rows can repeat more often than
/// the long drain and producer rows.
benchmark::internal::Benchmark* headline_reps(benchmark::internal::Benchmark* b) {
  return g_headline_reps > 0 ? b->Repetitions(g_headline_reps) : b;
}

/// Which rows register_rows() gives one variant (a bit mask).
enum RowSet : unsigned {
  kFastPathRow = 1u << 0,     ///< destructor/<v>/outstanding
  kSlowPathRow = 1u << 1,     ///< batch16/destructor/<v>/none
  kDrainRows = 1u << 2,       ///< drain/<v>/<N> at every drain size
  kProducerRows = 1u << 3,    ///< mt/destructor/<v>/threads:<T> at every count
  kOneProducerRow = 1u << 4,  ///< mt/destructor/<v>/threads:1 only
  /// paired/mt/destructor/<v>/threads:<T> at every count, or at 1 only
  /// (with kOneProducerRow): BM_ProducersPaired
  kPairedRows = 1u << 5,
  /// A variant of the docs' tables: every row.
  kVariantRows = kFastPathRow | kSlowPathRow | kDrainRows | kProducerRows | kPairedRows,
  /// A slow-path ablation (DC_BENCH_ABLATIONS): the two destructor rows.
  kSlowPathAblation = kFastPathRow | kSlowPathRow,
  /// A one-producer ablation (DC_BENCH_ONE_PRODUCER_ABLATIONS): the fast
  /// path and one producer's throughput.
  kOneProducerAblation = kFastPathRow | kOneProducerRow | kPairedRows,
};

/// Register the rows of one variant (variants.hpp) that `rows` names: the
/// variants' own table gets every row, an ablation only the rows of its
/// breakdown, so that the variants' tables keep their three variants.
template <class V>
void register_rows(unsigned rows) {
  const std::string v = V::name;
  if (rows & kFastPathRow) {
    headline_reps(benchmark::RegisterBenchmark(row("destructor/" + v + "/outstanding").c_str(),
                                               &BM_DestructorOutstanding<V>));
  }
  if (rows & kSlowPathRow) {
    headline_reps(benchmark::RegisterBenchmark(row("batch16/destructor/" + v + "/none").c_str(),
                                               &BM_Batch16DestructorNone<V>))
        ->UseManualTime();
  }
  if (rows & kDrainRows) {
    for (std::int64_t n : drain_sizes()) {
      drain_iterations(benchmark::RegisterBenchmark(row("drain/" + v).c_str(), &BM_Drain<V>)
                           ->Arg(n)
                           ->UseManualTime()
                           ->Unit(benchmark::kMicrosecond),
                       n);
    }
  }
  if (rows & (kProducerRows | kOneProducerRow)) {
    const std::vector<std::int64_t> counts =
        (rows & kProducerRows) ? kThreadCounts : std::vector<std::int64_t>{1};
    benchmark::RegisterBenchmark(row("mt/destructor/" + v).c_str(),
                                 &BM_Producers<DestructorShape<V>>)
        ->ArgName("threads")
        ->ArgsProduct({counts})
        ->UseManualTime()
        ->Iterations(g_smoke ? 1 : 15);
    if (rows & kPairedRows) {
      benchmark::RegisterBenchmark(row("paired/mt/destructor/" + v).c_str(),
                                   &BM_ProducersPaired<DestructorShape<V>>)
          ->ArgName("threads")
          ->ArgsProduct({counts})
          ->UseManualTime()
          ->Iterations(g_smoke ? 2 : 16);  // an even count: each order as often
    }
  }
}

void register_all() {
  headline_reps(benchmark::RegisterBenchmark(row("floor/treiber_push").c_str(), &BM_TreiberPush));
  benchmark::RegisterBenchmark(row("mutex_vector/outstanding").c_str(), &BM_MutexVectorOutstanding);
  auto* naive = benchmark::RegisterBenchmark(row("naive/per_payload").c_str(), &BM_NaivePerPayload)
                    ->Arg(31)
                    ->Arg(32);
  if (g_smoke) naive->Iterations(2000);  // two bursts of 1000
  headline_reps(benchmark::RegisterBenchmark(row("clock/steady_clock_pair").c_str(), &BM_ClockPair))
      ->UseManualTime();
  headline_reps(
      benchmark::RegisterBenchmark(row("batch16/floor/treiber_push").c_str(), &BM_Batch16Treiber))
      ->UseManualTime();
  benchmark::RegisterBenchmark(row("batch16/mutex_vector/none").c_str(), &BM_Batch16MutexVectorNone)
      ->UseManualTime();
  benchmark::RegisterBenchmark(row("batch16/naive/per_payload").c_str(), &BM_Batch16Naive)
      ->UseManualTime();
#define DC_BENCH_REGISTER(V) register_rows<V>(kVariantRows);
  DC_BENCH_VARIANTS(DC_BENCH_REGISTER)
#undef DC_BENCH_REGISTER
#ifndef DC_BENCH_WITH_FIXED
#define DC_BENCH_REGISTER(V) register_rows<V>(kSlowPathAblation);
  DC_BENCH_ABLATIONS(DC_BENCH_REGISTER)
#undef DC_BENCH_REGISTER
  // reference-no-rearm is in both breakdowns; its fast-path row is above.
  register_rows<ReferenceNoRearm>(kOneProducerRow | kPairedRows);
#define DC_BENCH_REGISTER(V) register_rows<V>(kOneProducerAblation);
  DC_BENCH_ONE_PRODUCER_ABLATIONS(DC_BENCH_REGISTER)
#undef DC_BENCH_REGISTER
#endif
  for (std::int64_t n : drain_sizes()) {
    for (auto* b :
         {benchmark::RegisterBenchmark(row("direct").c_str(), &BM_Direct),
          benchmark::RegisterBenchmark(row("floor/drain").c_str(), &BM_DrainFloor<false>),
          benchmark::RegisterBenchmark(row("floor/drain_reversed").c_str(), &BM_DrainFloor<true>),
          benchmark::RegisterBenchmark(row("drain/mutex_vector").c_str(), &BM_DrainMutexVector)}) {
      drain_iterations(b->Arg(n)->UseManualTime()->Unit(benchmark::kMicrosecond), n);
    }
  }
  for (auto* b :
       {benchmark::RegisterBenchmark(row("mt/treiber_push").c_str(), &BM_Producers<TreiberShape>),
        benchmark::RegisterBenchmark(row("mt/mutex_vector").c_str(),
                                     &BM_Producers<MutexVectorShape>)}) {
    b->ArgName("threads")
        ->ArgsProduct({kThreadCounts})
        ->UseManualTime()
        ->Iterations(g_smoke ? 1 : 15);
  }
}

}  // namespace
}  // namespace dc_bench

int main(int argc, char** argv) {
  const char* smoke = std::getenv("DC_BENCH_SMOKE");
  dc_bench::g_smoke = smoke != nullptr && std::string(smoke) == "1";
  const char* reps = std::getenv("DC_BENCH_HEADLINE_REPS");
  dc_bench::g_headline_reps = reps != nullptr ? std::atoi(reps) : 0;
  dc_bench::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("item_bytes", std::to_string(sizeof(dc_bench::Item)));
  benchmark::AddCustomContext("queue_field_align", std::to_string(DC_QUEUE_FIELD_ALIGN));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
