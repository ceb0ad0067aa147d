// handshake_tests.cpp: one push racing with the end of one drain, many times,
// through the REAL functions: on_user_object_destroyed<P> on the producer
// side, pending_call<P> (run by the fake host's run_all) on the main thread.
// Nothing of the protocol is copied here.
//
// Each round: a pending call is outstanding for an item already queued; a
// producer thread and the main thread start together; the producer runs the
// destructor path for a second item while the main thread runs the pending
// call.  Afterwards the main thread runs whatever pending call the producer
// added.  The second item is *stranded* if it is still queued then, with
// scheduled_ false and no pending call left: nobody will ever schedule a
// drain for it (a lost wakeup).
//
// Racing rounds: the reference must never strand.  The comparison variants
// may (their drain's release clear and acquire re-check are a
// store-buffering pair that x86 reorders; lost_wakeup.cpp measures the rate
// with one dedicated producer and consumer): here they must still never
// clean twice, and a stranded item must be drained by the next wakeup.
//
// Scripted rounds: the producer runs inside the drain, at the one point of
// the real drain where the test can stop it: the cleanup of the first item.
// That is after the reference's clear (so its producer schedules anew) and
// before the comparison variants' next take (so the take loop picks the
// item up).  No variant may strand there.
//
// Negative control: a producer that pushes and skips the scheduling step (a
// wakeup lost by construction) must be reported stranded every round, which
// shows that the detector sees a stranded item when there is one.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "deferred_cleanup/callback.hpp"
#include "deferred_cleanup/drain.hpp"
#include "deferred_cleanup/queue.hpp"
#include "deferred_cleanup/scheduling.hpp"
#include "fake_host.hpp"
#include "test_support.hpp"

namespace dc = deferred_cleanup;

namespace {

template <class P>
class Handshake : public ::testing::Test {};
TYPED_TEST_SUITE(Handshake, dc_test::AllPolicies, dc_test::PolicyName);

enum class Mode { racing, scripted, push_only };

// Scripted interleaving: 0 -> 1 when the drain is inside the first item's
// cleanup, 1 -> 2 when the producer finished; 3 when the main thread's first
// run_all returned (the negative control waits for it).  Bounded waits (1 s), so that a
// broken script fails instead of hanging.
std::atomic<int> g_phase{0};

bool wait_phase(int want) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (g_phase.load(std::memory_order_seq_cst) < want) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

struct Hits {
  unsigned char a = 0, b = 0, c = 0;
  bool scripted = false;
  bool script_ok = true;
};

void cleanup_a(void* p) noexcept {
  auto* h = static_cast<Hits*>(p);
  ++h->a;
  if (h->scripted) {
    g_phase.store(1, std::memory_order_seq_cst);
    h->script_ok = wait_phase(2) && h->script_ok;
  }
}
void cleanup_b(void* p) noexcept { ++static_cast<Hits*>(p)->b; }
void cleanup_c(void* p) noexcept { ++static_cast<Hits*>(p)->c; }

struct RaceOutcome {
  unsigned rounds = 0;
  unsigned stranded = 0;
  unsigned twice = 0;
  unsigned recovered = 0;      // stranded items drained by the next wakeup
  unsigned bad_state = 0;      // stranded with scheduled_ true or a call outstanding
  unsigned script_failed = 0;  // a scripted wait timed out
  unsigned max_outstanding = 0;
};

template <class P>
RaceOutcome race(Mode mode, unsigned rounds, unsigned stop_after_stranded) {
  RaceOutcome out;
  dc_test::set_main_thread();
  for (unsigned r = 0; r < rounds && out.stranded < stop_after_stranded; ++r) {
    dc_test::reset_host(32, 0, r);
    dc::BasicQueue<P> q(dc_test::host());
    Hits h;
    h.scripted = mode == Mode::scripted;
    dc::DeferredCleanupItem a, b, c;
    dc::init_item(a, &h, &cleanup_a);
    dc::init_item(b, &h, &cleanup_b);
    dc::init_item(c, &h, &cleanup_c);
    EXPECT_EQ(dc::on_user_object_destroyed(q, &a), dc::ScheduleResult::scheduled);

    g_phase.store(0, std::memory_order_seq_cst);
    std::atomic<int> go{0};
    std::thread producer([&] {
      go.fetch_add(1, std::memory_order_seq_cst);
      for (unsigned n = 0; go.load(std::memory_order_seq_cst) < 2; ++n) {
        if (n > 4096) std::this_thread::yield();  // the other thread may share our CPU
      }
      if (mode == Mode::scripted) {
        h.script_ok = wait_phase(1) && h.script_ok;
      } else if (mode == Mode::push_only) {
        h.script_ok = wait_phase(3) && h.script_ok;  // after the drain: nothing can take it
      }
      for (unsigned spin = r % 64; spin > 0; --spin) {
        __asm__ __volatile__("" ::: "memory");  // vary the producer's start a little
      }
      if (mode == Mode::push_only) {
        q.push(&b);  // negative control: the scheduling step is skipped
      } else {
        dc::on_user_object_destroyed(q, &b);
      }
      g_phase.store(2, std::memory_order_seq_cst);
    });
    go.fetch_add(1, std::memory_order_seq_cst);
    for (unsigned n = 0; go.load(std::memory_order_seq_cst) < 2; ++n) {
      if (n > 4096) std::this_thread::yield();
    }
    dc_test::run_all();  // the outstanding pending call, racing with the producer
    if (mode == Mode::push_only) g_phase.store(3, std::memory_order_seq_cst);
    producer.join();
    dc_test::run_all();  // whatever the producer scheduled
    ++out.rounds;
    out.script_failed += !h.script_ok;
    const auto cnt = dc_test::counters();
    if (cnt.max_ours_outstanding > out.max_outstanding) {
      out.max_outstanding = static_cast<unsigned>(cnt.max_ours_outstanding);
    }
    if (!q.empty_snapshot()) {
      ++out.stranded;
      out.bad_state += q.scheduled_snapshot() || cnt.ours_outstanding != 0;
      // The next wakeup: another item's destructor path schedules a drain
      // that takes the stranded item too.
      EXPECT_EQ(dc::on_user_object_destroyed(q, &c), dc::ScheduleResult::scheduled);
      dc_test::run_all();
      out.recovered += (h.b == 1 && h.c == 1 && q.empty_snapshot());
    }
    out.twice += (h.a > 1) + (h.b > 1) + (h.c > 1);
    EXPECT_EQ(h.a, 1);
    EXPECT_EQ(h.b, 1) << "round " << r;
  }
  return out;
}

unsigned rounds_from_env() {
  return static_cast<unsigned>(dc_test::env_u64("DC_HANDSHAKE_ROUNDS", 5000));
}

TYPED_TEST(Handshake, RacingPushAgainstTheEndOfADrain) {
  const RaceOutcome o = race<TypeParam>(Mode::racing, rounds_from_env(), ~0u);
  std::printf("[handshake] %s racing: %u rounds, %u stranded (recovered by the next wakeup: %u)\n",
              TypeParam::name, o.rounds, o.stranded, o.recovered);
  if constexpr (TypeParam::variant == dc::Variant::reference) {
    EXPECT_EQ(o.stranded, 0u) << "a lost wakeup in the reference";
  }
  EXPECT_EQ(o.recovered, o.stranded);
  EXPECT_EQ(o.bad_state, 0u);
  EXPECT_EQ(o.twice, 0u);
  EXPECT_LE(o.max_outstanding, 1u);
}

TYPED_TEST(Handshake, ScriptedPushInsideTheDrainNeverStrands) {
  const RaceOutcome o = race<TypeParam>(Mode::scripted, 20, 1);
  std::printf("[handshake] %s scripted: %u rounds, %u stranded\n", TypeParam::name, o.rounds,
              o.stranded);
  EXPECT_EQ(o.rounds, 20u);
  EXPECT_EQ(o.script_failed, 0u);
  EXPECT_EQ(o.stranded, 0u);
  EXPECT_EQ(o.twice, 0u);
  EXPECT_LE(o.max_outstanding, 1u);
}

TYPED_TEST(Handshake, NegativeControlPushWithoutSchedulingStrandsEveryTime) {
  const RaceOutcome o = race<TypeParam>(Mode::push_only, 20, ~0u);
  std::printf("[handshake] %s push without scheduling (negative control): %u rounds, %u stranded\n",
              TypeParam::name, o.rounds, o.stranded);
  EXPECT_EQ(o.script_failed, 0u);
  EXPECT_EQ(o.stranded, o.rounds) << "the harness missed a stranded item it was shown";
  EXPECT_EQ(o.recovered, o.stranded);
  EXPECT_EQ(o.twice, 0u);
}

}  // namespace
