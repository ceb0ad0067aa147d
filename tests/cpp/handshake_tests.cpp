// handshake_tests.cpp: one push racing with the end of one drain, many times,
// with a positive and a negative control on the same harness.
//
// Each round: a pending call is outstanding for an item already queued; a
// producer thread and the main thread start together; the producer pushes a
// second item and tries to schedule, while the main thread runs the pending
// call.  Afterwards the main thread runs whatever pending call the producer
// added.  The second item is *stranded* if it is still queued then: nobody
// will ever schedule a drain for it (a lost wakeup).
//
// Racing rounds (ClearThenTakeNeverStrandsAnItem): the pending call is the
// reference's order (clear scheduled_, then take), with a yield between the
// two to widen the window; no round may strand.
//
// Scripted rounds: the producer is placed exactly inside the window, through
// two flags, for both orders:
//   clear, [producer pushes and claims], take   the reference: never strands;
//   take, [producer pushes and claims], clear   the seed bug that LOST_WAKEUP
//                                               models in tests/model/: must
//                                               strand every time, which shows
//                                               that the harness sees a lost
//                                               wakeup when there is one.  (The
//                                               racing rounds alone rarely hit
//                                               so narrow a window under ASan.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "deferred_cleanup/drain.hpp"
#include "deferred_cleanup/queue.hpp"
#include "deferred_cleanup/scheduling.hpp"
#include "fake_host.hpp"

namespace dc = deferred_cleanup;

namespace {

void count_cleanup(void* payload) noexcept { ++*static_cast<unsigned char*>(payload); }

int clear_then_drain(void* arg) noexcept {
  dc::Queue& q = *static_cast<dc::Queue*>(arg);
  q.clear_schedule();
  std::this_thread::yield();  // widen the window
  dc::drain_all(q);
  return 0;
}

// Scripted interleaving: g_phase 0 -> 1 when the pending call reached the
// window, 1 -> 2 when the producer pushed and tried to schedule.  Waits are
// bounded (1 s) so that a broken script fails instead of hanging.
std::atomic<int> g_phase{0};

// Only the first pending call of a round enters the script: a later one (the
// producer's own) finds the phase past 0 and runs straight through.
void reach_window() {
  int expected = 0;
  g_phase.compare_exchange_strong(expected, 1, std::memory_order_seq_cst);
}

bool wait_phase(int want) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (g_phase.load(std::memory_order_seq_cst) < want) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return true;
}

int scripted_clear_then_drain(void* arg) noexcept {
  dc::Queue& q = *static_cast<dc::Queue*>(arg);
  q.clear_schedule();
  reach_window();
  wait_phase(2);
  dc::drain_all(q);
  return 0;
}

int scripted_drain_then_clear(void* arg) noexcept {
  dc::Queue& q = *static_cast<dc::Queue*>(arg);
  dc::drain_all(q);
  reach_window();
  wait_phase(2);
  q.clear_schedule();  // the bug: no recheck of head_ after this
  return 0;
}

struct RaceOutcome {
  unsigned rounds = 0;
  unsigned stranded = 0;
  unsigned twice = 0;
};

RaceOutcome race(dc::PendingCallFn fn, unsigned rounds, unsigned stop_after_stranded, bool scripted = false) {
  RaceOutcome out;
  dc_test::set_main_thread();
  for (unsigned r = 0; r < rounds && out.stranded < stop_after_stranded; ++r) {
    dc_test::reset_host(32, 0, r);
    dc::Queue q(dc::Variant::reference, dc_test::host());
    unsigned char hits[2] = {0, 0};
    dc::DeferredCleanupItem a, b;
    dc::init_item(a, &hits[0], &count_cleanup);
    dc::init_item(b, &hits[1], &count_cleanup);
    q.push(&a);
    EXPECT_EQ(dc::try_schedule(q, fn), dc::ScheduleResult::scheduled);

    g_phase.store(0, std::memory_order_seq_cst);
    std::atomic<int> go{0};
    std::thread producer([&] {
      go.fetch_add(1, std::memory_order_seq_cst);
      while (go.load(std::memory_order_seq_cst) < 2) {
      }
      if (scripted) {
        EXPECT_TRUE(wait_phase(1));
      }
      for (unsigned spin = r % 64; spin > 0; --spin) {
        __asm__ __volatile__("" ::: "memory");  // vary the producer's start a little
      }
      q.push(&b);
      dc::try_schedule(q, fn);
      g_phase.store(2, std::memory_order_seq_cst);
    });
    go.fetch_add(1, std::memory_order_seq_cst);
    while (go.load(std::memory_order_seq_cst) < 2) {
    }
    dc_test::run_all();  // the outstanding pending call, racing with the producer
    producer.join();
    dc_test::run_all();  // whatever the producer scheduled
    ++out.rounds;
    if (!q.empty_snapshot()) {
      ++out.stranded;
      q.clear_schedule();
      dc::drain_all(q);  // tidy up: the items are on the stack
    }
    out.twice += (hits[0] > 1) + (hits[1] > 1);
  }
  return out;
}

unsigned rounds_from_env() {
  const char* v = std::getenv("DC_HANDSHAKE_ROUNDS");
  return (v != nullptr && *v != '\0') ? static_cast<unsigned>(std::strtoul(v, nullptr, 10)) : 5000u;
}

TEST(Handshake, ClearThenTakeNeverStrandsAnItem) {
  const RaceOutcome o = race(&clear_then_drain, rounds_from_env(), 1);
  std::printf("[handshake] clear-then-take: %u rounds, %u stranded\n", o.rounds, o.stranded);
  EXPECT_EQ(o.stranded, 0u);
  EXPECT_EQ(o.twice, 0u);
}

TEST(Handshake, ScriptedClearThenTakeNeverStrands) {
  const RaceOutcome o = race(&scripted_clear_then_drain, 20, 1, true);
  std::printf("[handshake] scripted clear-then-take: %u rounds, %u stranded\n", o.rounds, o.stranded);
  EXPECT_EQ(o.rounds, 20u);
  EXPECT_EQ(o.stranded, 0u);
  EXPECT_EQ(o.twice, 0u);
}

TEST(Handshake, NegativeControlScriptedTakeThenClearStrandsEveryTime) {
  const RaceOutcome o = race(&scripted_drain_then_clear, 20, 1000, true);
  std::printf("[handshake] scripted take-then-clear (negative control): %u rounds, %u stranded\n", o.rounds,
              o.stranded);
  EXPECT_EQ(o.stranded, o.rounds) << "the harness missed a lost wakeup it was shown";
  EXPECT_EQ(o.twice, 0u);
}

}  // namespace
