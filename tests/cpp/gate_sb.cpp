// SPDX-License-Identifier: Apache-2.0
// gate_sb.cpp: the in-flight gate's store-buffering pair on the real hardware,
// with the real queue code.
//
// The gate (queue.hpp) is the second store-buffering pair of the reference:
//
//   producer   gate_enter():  in_flight_.fetch_add(1)  ; read accepting_
//   shutdown   close()        accepting_ = false       ; read in_flight()
//
// (shutdown_at_exit() in shutdown.hpp is close() then wait_gate(), whose first
// step is exactly this one in_flight() read.)  The bad outcome: shutdown reads
// in_flight() == 0, concludes that no producer is inside, and goes on, while
// the producer read accepting_ == true and goes on to call the host
// (Py_AddPendingCall; after finalization that crashes CPython 3.10-3.12).
// seq_cst on all four operations forbids it.
//
// On x86-64 the producer's increment is a locked RMW (`lock add`), which
// drains the producer's own store buffer, but that does not help: with a
// release close(), shutdown's store is a plain `mov` that can wait in
// *shutdown's* store buffer while its plain load of in_flight_ reads 0, and
// the producer's increment and its load of accepting_ (still true in memory)
// both happen in between.  So this is the one pair of the reference that x86
// can show when its order is weakened.
//
// Two threads, each pinned to its own CPU when the machine allows it.  Per
// iteration: a freshly constructed queue (BasicQueue has no reopen; two slots
// alternate, so the previous iteration's producer is never inside the queue
// being rebuilt), both threads leave a two-flag spin barrier together, each
// waits a small pseudo-random number of pauses (to sweep the two threads'
// relative timing, as litmus7 does), and then:
//
//   shutdown (main thread)   close(); then ONE read of in_flight();
//                            then it signals that the read is made;
//   producer                 gate_enter(); records the result; if it entered,
//                            waits for shutdown's signal, then gate_leave().
//
// The producer stays inside the gate until shutdown has read in_flight():
// one that entered and left before the read is the harmless order (its host
// call happened-before shutdown went on, through gate_leave()'s release), and
// would otherwise look like a witness.  A witness is an iteration in which
// shutdown read 0 and the producer entered: both reads missed the other
// side's write.  The other three outcomes are counted too (shutdown first,
// producer first, both saw the other), so a run whose threads never raced is
// visible.
//
// Policies, both compiled from the real headers:
//   reference      dc::ReferencePolicy (seq_cst on all four): never a witness;
//   close-release  TEST ONLY, declared below: ReferencePolicy with gate_close
//                  alone weakened to release, the shape of the mutant
//                  tests/mutants/sb_gate_close.py: the negative control, which
//                  must show witnesses on x86-64.
//
// Usage:
//   gate_sb [--policy reference|close-release|all] [--iterations N]
//           [--stop-at-first] [--json PATH] [--no-pin]
// Prints one line per policy:
//   gate-sb: policy=<p> iterations=<n> witnesses=<k> rate=<k/n> seconds=<s> ...
// With --stop-at-first a policy stops at the end of the batch (4096
// iterations) holding its first witness; first_witness_at gives its exact
// iteration (1-based).  --json writes the machine, the compiler and the
// counts.  Exit status: 0, 1 on an impossible outcome (in_flight() read other
// than 0 or 1, a queue's gate not empty at the end of a batch), 2 on bad
// arguments.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "deferred_cleanup/policy.hpp"
#include "deferred_cleanup/queue.hpp"
#include "deferred_cleanup/scheduling.hpp"
#include "race_harness.hpp"

namespace dc = deferred_cleanup;

namespace {

/// TEST ONLY, the negative control: the reference's policy with only the
/// shutdown's close of accepting_ weakened from seq_cst to release, as the
/// mutant tests/mutants/sb_gate_close.py does to policy.hpp.  Every other
/// constant, and all the code, is ReferencePolicy's.  Not a variant of the
/// library: it exists only in this program.
struct GateCloseReleasePolicy : dc::ReferencePolicy {
  static constexpr const char* name = "close-release";
  static constexpr std::memory_order gate_close = std::memory_order_release;
};

using race_harness::cpu_relax;
using race_harness::pin;

// The queue never calls its host here (gate_enter, close and in_flight touch
// only the queue's own atomics); a host is needed only to construct it.
int refuse_add_pending_call(dc::PendingCallFn, void*) { return -1; }
bool never_main() { return false; }
const dc::Host kNoHost{
    .add_pending_call = &refuse_add_pending_call,
    .is_main_thread = &never_main,
    .in_gate = nullptr,
    .now_ns = nullptr,
    .finalizing = nullptr,
    .after_drain = nullptr,
};

// The two halves of the race as their own symbols (tools/disasm.py style):
// each only calls the real members.
template <class P>
__attribute__((noinline)) std::uint32_t shutdown_side(dc::BasicQueue<P>& q) {
  q.close();
  return q.in_flight();
}

template <class P>
__attribute__((noinline)) bool producer_side(dc::BasicQueue<P>& q) {
  return q.gate_enter();
}

struct alignas(64) Flag {
  std::atomic<std::uint64_t> v{0};
};

// One iteration's pause counts for both sides, from the iteration number
// (splitmix64): both threads compute the same pair without sharing it.
inline void skews(std::uint64_t i, unsigned& s, unsigned& p) {
  std::uint64_t z = i + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  s = static_cast<unsigned>(z & 15);
  p = static_cast<unsigned>((z >> 8) & 15);
}

struct Result {
  const char* policy = "";
  std::uint64_t iterations = 0;
  std::uint64_t witnesses = 0;         // shutdown read 0 and the producer entered
  std::uint64_t first_witness_at = 0;  // 1-based; 0 if none
  std::uint64_t shutdown_first = 0;    // read 0, producer turned back (saw closed)
  std::uint64_t producer_first = 0;    // read 1, producer entered
  std::uint64_t both_saw = 0;          // read 1, producer turned back
  std::uint64_t impossible = 0;        // read > 1, or in_flight_ != 0 after the iteration
  double seconds = 0;
  bool pinned = false;
};

constexpr std::uint64_t kBatch = 4096;

template <class P>
Result run(std::uint64_t iterations, bool stop_at_first, bool want_pin, int cpu_a, int cpu_b) {
  using Q = dc::BasicQueue<P>;
  Result r;
  r.policy = P::name;
  // Two slots: iteration i uses slot i % 2.  The main thread rebuilds slot
  // i % 2 after barrier i-1, which the producer reaches only after it
  // finished iteration i-2 (its last use of that slot).
  struct alignas(64) Slot {
    unsigned char bytes[sizeof(Q)];
  };
  static Slot storage[2];
  std::atomic<Q*> slot[2] = {nullptr, nullptr};
  std::vector<std::uint32_t> seen(kBatch);    // shutdown's in_flight() read
  std::vector<std::uint8_t> entered(kBatch);  // producer's gate_enter() result
  Flag arrive_s, arrive_p;                    // the barrier: the iteration each side reached
  Flag finished_p;                            // the last iteration the producer completed
  Flag read_s;                                // the last iteration whose in_flight() read was made
  Flag limit;                                 // the producer may run iterations up to this
  std::atomic<bool> stop{false};

  std::thread producer([&] {
    for (std::uint64_t i = 1;; ++i) {
      while (limit.v.load(std::memory_order_acquire) < i) {
        if (stop.load(std::memory_order_acquire)) return;
        cpu_relax();
      }
      // Barrier i: announce, then wait for the main thread (its release
      // store comes after it built slot i % 2).
      arrive_p.v.store(i, std::memory_order_release);
      while (arrive_s.v.load(std::memory_order_acquire) < i) cpu_relax();
      Q& q = *slot[i & 1].load(std::memory_order_relaxed);
      unsigned s, p;
      skews(i, s, p);
      for (unsigned k = 0; k < p; ++k) cpu_relax();
      const bool in = producer_side(q);
      entered[(i - 1) % kBatch] = in ? 1 : 0;
      if (in) {
        // Stay inside the gate until shutdown has made its one read: a
        // producer that entered and left before that read is the harmless
        // order (its host call happened-before shutdown went on), not a
        // witness.
        while (read_s.v.load(std::memory_order_acquire) < i) cpu_relax();
        q.gate_leave();
      }
      finished_p.v.store(i, std::memory_order_release);
    }
  });
  if (want_pin) {
    r.pinned = pin(pthread_self(), cpu_a) && pin(producer.native_handle(), cpu_b);
  }

  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t done = 0;
  while (done < iterations) {
    const std::uint64_t end = std::min(iterations, done + kBatch);
    limit.v.store(end, std::memory_order_release);
    for (std::uint64_t i = done + 1; i <= end; ++i) {
      const int k = static_cast<int>(i & 1);
      Q* q = new (storage[k].bytes) Q(&kNoHost);  // atomics only: nothing to destroy
      slot[k].store(q, std::memory_order_relaxed);
      arrive_s.v.store(i, std::memory_order_release);
      while (arrive_p.v.load(std::memory_order_acquire) < i) cpu_relax();
      unsigned s, p;
      skews(i, s, p);
      for (unsigned n = 0; n < s; ++n) cpu_relax();
      seen[(i - 1) % kBatch] = shutdown_side(*q);
      read_s.v.store(i, std::memory_order_release);
    }
    // The producer's records of the batch are visible once it has finished
    // iteration `end`.
    while (finished_p.v.load(std::memory_order_acquire) < end) cpu_relax();
    for (auto& sl : slot) {  // every producer has left: the gate is empty
      Q* q = sl.load(std::memory_order_relaxed);
      if (q != nullptr && q->in_flight() != 0) ++r.impossible;
    }
    for (std::uint64_t i = done + 1; i <= end; ++i) {
      const std::uint32_t n = seen[(i - 1) % kBatch];
      const bool in = entered[(i - 1) % kBatch] != 0;
      if (n > 1) {
        ++r.impossible;
      } else if (n == 0 && in) {
        ++r.witnesses;
        if (r.first_witness_at == 0) r.first_witness_at = i;
      } else if (n == 0) {
        ++r.shutdown_first;
      } else if (in) {
        ++r.producer_first;
      } else {
        ++r.both_saw;
      }
    }
    done = end;
    if (stop_at_first && r.witnesses > 0) break;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.iterations = done;
  stop.store(true, std::memory_order_release);
  producer.join();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string policy = "all";
  std::uint64_t iterations = 10'000'000;
  bool stop_at_first = false;
  bool want_pin = true;
  std::string json;
  for (int a = 1; a < argc; ++a) {
    const std::string s = argv[a];
    if (s == "--policy" && a + 1 < argc) {
      policy = argv[++a];
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
                   "usage: %s [--policy reference|close-release|all] [--iterations N] "
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
    if (policy == "all" || policy == P::name) {
      results.push_back(run<P>(iterations, stop_at_first, want_pin, cpus.first, cpus.second));
    }
  };
  go(GateCloseReleasePolicy{});
  go(dc::ReferencePolicy{});
  if (results.empty()) {
    std::fprintf(stderr, "unknown policy '%s' (reference, close-release, all)\n", policy.c_str());
    return 2;
  }

  bool bad = false;
  for (const Result& r : results) {
    std::printf(
        "gate-sb: policy=%s iterations=%llu witnesses=%llu rate=%.3g seconds=%.2f "
        "first_witness_at=%llu pinned=%s shutdown_first=%llu producer_first=%llu "
        "both_saw=%llu impossible=%llu\n",
        r.policy, (unsigned long long)r.iterations, (unsigned long long)r.witnesses,
        r.iterations ? double(r.witnesses) / double(r.iterations) : 0.0, r.seconds,
        (unsigned long long)r.first_witness_at, r.pinned ? "yes" : "no",
        (unsigned long long)r.shutdown_first, (unsigned long long)r.producer_first,
        (unsigned long long)r.both_saw, (unsigned long long)r.impossible);
    bad = bad || r.impossible;
  }
  std::fflush(stdout);

  if (!json.empty()) {
    std::ofstream o(json);
    race_harness::write_machine_fields(o, "tests/cpp/gate_sb.cpp", stop_at_first);
    o << "  \"policies\": [\n";
    for (std::size_t k = 0; k < results.size(); ++k) {
      const Result& r = results[k];
      o << "    {\"policy\": \"" << r.policy << "\", \"iterations\": " << r.iterations
        << ", \"witnesses\": " << r.witnesses << ", \"first_witness_at\": " << r.first_witness_at
        << ", \"seconds\": " << r.seconds << ", \"pinned\": " << (r.pinned ? "true" : "false")
        << ", \"shutdown_first\": " << r.shutdown_first
        << ", \"producer_first\": " << r.producer_first << ", \"both_saw\": " << r.both_saw
        << ", \"impossible\": " << r.impossible << "}" << (k + 1 < results.size() ? ",\n" : "\n");
    }
    o << "  ]\n}\n";
  }
  return bad ? 1 : 0;
}
