// SPDX-License-Identifier: Apache-2.0
// sb_shape.cpp: the cuda-core 1.2.0 drain tail's instruction shape, alone.
//
// Standalone (no header of the deferred-cleanup project): a lock-free
// intrusive MPSC stack `head`, a flag `scheduled`, and a "pending call" that a
// consumer thread polls.  The memory orders are those of cuda-core's
// DeferredCleanupQueue (cuda_core/cuda/core/_cpp/rt/py_deferred_cleanup.cpp,
// cuda-python commit 08f74293; resource_handles.cpp at the 1.2.0 tag):
//   producer  push: compare-exchange on head (release)
//             schedule: load head (acquire), compare-exchange scheduled
//             false -> true (acq_rel / relaxed), then add the pending call
//   consumer  drain: exchange head with null (acquire) until empty, run the
//             items; store scheduled = false (release); load head (acquire);
//             if not empty, schedule again.
// On x86-64 g++ emits `xchg`, `movb $0`, `mov` for the consumer's tail, the
// shape objdump finds in the wheel (cuda_core_holes.py prints both).
//
// Build: g++ -O2 -std=c++17 -pthread sb_shape.cpp -o sb_shape
// Run:   sb_shape shipped|fixed ITERATIONS
//   shipped  the orders above;
//   fixed    the same with the clear and the re-check seq_cst, and the push
//            and the claim seq_cst (the C++ memory model needs both halves of
//            a store-buffering pair in the single total order; on x86-64 only
//            the clear changes: `xchg` instead of `movb`).
// Prints: sb_shape: mode=<m> iterations=<n> lost=<k> pinned=<yes|no>
// A lost wakeup: the producer's item queued, scheduled false, no pending call
// outstanding and the consumer idle.  The producer counts it, then schedules
// itself (recovery) and goes on.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {

struct Item {
  Item* next = nullptr;
};

template <bool Fixed>
struct Orders {
  static constexpr std::memory_order push =
      Fixed ? std::memory_order_seq_cst : std::memory_order_release;
  static constexpr std::memory_order check =
      Fixed ? std::memory_order_seq_cst : std::memory_order_acquire;
  static constexpr std::memory_order claim =
      Fixed ? std::memory_order_seq_cst : std::memory_order_acq_rel;
  static constexpr std::memory_order claim_fail =
      Fixed ? std::memory_order_seq_cst : std::memory_order_relaxed;
  static constexpr std::memory_order take =
      Fixed ? std::memory_order_seq_cst : std::memory_order_acquire;
  static constexpr std::memory_order clear =
      Fixed ? std::memory_order_seq_cst : std::memory_order_release;
  static constexpr std::memory_order recheck =
      Fixed ? std::memory_order_seq_cst : std::memory_order_acquire;
};

alignas(64) std::atomic<Item*> g_head{nullptr};
alignas(64) std::atomic<bool> g_scheduled{false};
alignas(64) std::atomic<int> g_pending{0};  // "Py_AddPendingCall": calls outstanding
alignas(64) std::atomic<bool> g_busy{false};
alignas(64) std::atomic<unsigned long> g_cleaned{0};
std::atomic<bool> g_stop{false};

inline void relax() { __builtin_ia32_pause(); }

template <bool F>
__attribute__((noinline)) void schedule() {
  using O = Orders<F>;
  if (g_head.load(O::check) == nullptr) return;
  bool expected = false;
  if (g_scheduled.compare_exchange_strong(expected, true, O::claim, O::claim_fail)) {
    g_pending.fetch_add(1, std::memory_order_seq_cst);
  }
}

template <bool F>
__attribute__((noinline)) void push(Item* it) {
  using O = Orders<F>;
  Item* old = g_head.load(std::memory_order_relaxed);
  do {
    it->next = old;
  } while (!g_head.compare_exchange_weak(old, it, O::push, std::memory_order_relaxed));
  schedule<F>();
}

template <bool F>
__attribute__((noinline)) void drain() {
  using O = Orders<F>;
  for (;;) {
    Item* list = g_head.exchange(nullptr, O::take);
    if (list == nullptr) break;
    while (list != nullptr) {
      Item* next = list->next;
      g_cleaned.fetch_add(1, std::memory_order_release);  // the item's cleanup
      list = next;
    }
  }
  g_scheduled.store(false, O::clear);
  if (g_head.load(O::recheck) != nullptr) schedule<F>();
}

bool pin(pthread_t t, int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return pthread_setaffinity_np(t, sizeof s, &s) == 0;
}

template <bool F>
int run(unsigned long n) {
  std::thread consumer([] {
    while (!g_stop.load(std::memory_order_acquire)) {
      if (g_pending.load(std::memory_order_acquire) > 0) {
        g_busy.store(true, std::memory_order_seq_cst);
        g_pending.fetch_sub(1, std::memory_order_seq_cst);
        drain<F>();
        g_busy.store(false, std::memory_order_seq_cst);
      } else {
        relax();
      }
    }
  });
  cpu_set_t mine;
  CPU_ZERO(&mine);
  int cpus[2] = {-1, -1}, k = 0;
  if (sched_getaffinity(0, sizeof mine, &mine) == 0) {
    for (int c = 0; c < CPU_SETSIZE && k < 2; ++c)
      if (CPU_ISSET(c, &mine)) cpus[k++] = c;
  }
  const bool pinned =
      k == 2 && pin(pthread_self(), cpus[0]) && pin(consumer.native_handle(), cpus[1]);
  Item item;
  unsigned long lost = 0;
  for (unsigned long i = 0; i < n; ++i) {
    push<F>(&item);
    unsigned long spins = 0;
    while (g_cleaned.load(std::memory_order_acquire) == i) {
      if (++spins < 4000) {
        relax();
        continue;
      }
      spins = 2000;
      std::this_thread::yield();
      const bool idle =
          g_pending.load(std::memory_order_seq_cst) == 0 && !g_busy.load(std::memory_order_seq_cst);
      if (idle && g_cleaned.load(std::memory_order_seq_cst) == i &&
          g_head.load(std::memory_order_seq_cst) != nullptr &&
          !g_scheduled.load(std::memory_order_seq_cst)) {
        ++lost;  // stuck: nobody will drain this item
        schedule<F>();
      }
    }
  }
  g_stop.store(true, std::memory_order_release);
  consumer.join();
  std::printf("sb_shape: mode=%s iterations=%lu lost=%lu pinned=%s\n", F ? "fixed" : "shipped", n,
              lost, pinned ? "yes" : "no");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "shipped") != 0 && std::strcmp(argv[1], "fixed") != 0)) {
    std::fprintf(stderr, "usage: %s shipped|fixed ITERATIONS\n", argv[0]);
    return 2;
  }
  const unsigned long n = std::strtoul(argv[2], nullptr, 10);
  return std::strcmp(argv[1], "fixed") == 0 ? run<true>(n) : run<false>(n);
}
