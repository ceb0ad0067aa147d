// SPDX-License-Identifier: Apache-2.0
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

// ------------------------------------------------------------------------
// Ported from the `mutate` branch (tests/cpp/handshake_tests.cpp there,
// commit 4f5d52a, written against the old API), typed over the variants.

void spin(unsigned n) {
  for (unsigned i = 0; i < n; ++i) {
    __asm__ __volatile__("" ::: "memory");  // a delay the compiler keeps
  }
}

template <class P>
struct DuringDrain {
  dc::BasicQueue<P>* q = nullptr;
  dc::DeferredCleanupItem* second = nullptr;
  dc::ScheduleResult producer_result = dc::ScheduleResult::not_accepting;
  unsigned char hits = 0;
};

// Cleanup of the first item: a producer on another thread destroys the
// second user object while the drain runs (join: it finishes before we return).
template <class P>
void start_producer_and_join(void* p) noexcept {
  auto* c = static_cast<DuringDrain<P>*>(p);
  ++c->hits;
  std::thread producer(
      [c] { c->producer_result = dc::on_user_object_destroyed(*c->q, c->second); });
  producer.join();
}

// Deterministic: a producer during the real drain.  The reference cleared
// scheduled_ before its take, so the producer must claim and make its own
// pending call; the comparison variants still hold the claim during their
// take loop, so the producer makes none and the loop's next take gets it.
TYPED_TEST(Handshake, ProducerDuringADrain) {
  dc_test::reset_host(32, 0, 1);
  dc_test::set_main_thread();
  dc::BasicQueue<TypeParam> q(dc_test::host());
  unsigned char second_hits = 0;
  dc::DeferredCleanupItem first, second;
  DuringDrain<TypeParam> ctx;
  ctx.q = &q;
  ctx.second = &second;
  dc::init_item(first, &ctx, &start_producer_and_join<TypeParam>);
  dc::init_item(second, &second_hits, &dc_test::count_cleanup);

  ASSERT_EQ(dc::on_user_object_destroyed(q, &first), dc::ScheduleResult::scheduled);
  ASSERT_TRUE(dc_test::run_one());  // the real pending_call
  EXPECT_EQ(ctx.hits, 1);
  EXPECT_EQ(second_hits, 1);  // taken by the drain's next loop
  if constexpr (TypeParam::variant == dc::Variant::reference) {
    EXPECT_EQ(ctx.producer_result, dc::ScheduleResult::scheduled)
        << "a producer during the drain found the claim still held: an item it pushes after the "
           "drain's last take would be stranded (lost wakeup)";
    EXPECT_EQ(dc_test::run_all(), 1u);  // the producer's own call: finds the list empty
  } else {
    EXPECT_EQ(ctx.producer_result, dc::ScheduleResult::already_scheduled);
    EXPECT_EQ(dc_test::run_all(), 0u);
  }
  EXPECT_EQ(second_hits, 1);
  EXPECT_TRUE(q.empty_snapshot());
  EXPECT_FALSE(q.scheduled_snapshot());
  EXPECT_LE(dc_test::counters().max_ours_outstanding, 1u);
}

template <class P>
struct Round {
  std::atomic<int> ready{0};     // set by the producer once it spins
  std::atomic<int> released{0};  // set by the first cleanup, read by the producer
  std::atomic<int> seen{0};      // set by the producer when it saw the release
  bool raced = false;            // the producer saw the release while the drain still ran
  unsigned consumer_delay = 0;   // spins in the first cleanup after releasing
  unsigned char first_hits = 0;
};

template <class P>
void release_producer(void* p) noexcept {
  auto* r = static_cast<Round<P>*>(p);
  ++r->first_hits;
  r->released.store(1, std::memory_order_seq_cst);
  // Both threads must be on a CPU for the race to happen: wait (bounded)
  // until the producer saw the release.  On a loaded machine it may have
  // been descheduled; the round then does not count as raced.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
  while (r->seen.load(std::memory_order_seq_cst) == 0 && std::chrono::steady_clock::now() < until) {
  }
  r->raced = r->seen.load(std::memory_order_seq_cst) != 0;
  spin(r->consumer_delay);  // then the drain takes again, (clears,) and returns
}

// Probabilistic: the producer is released from the first item's cleanup and
// pushes after a delay that follows a staircase towards the end of the drain
// (longer after a push the drain still took, shorter after one it missed).
// Rounds stop at the first stranded item.  The reference must strand none;
// a comparison variant may (its lost wakeup), and then the next wakeup must
// drain the stranded item.
TYPED_TEST(Handshake, RacingPushAtTheEndOfADrain) {
  const unsigned rounds = static_cast<unsigned>(dc_test::env_u64("DC_HANDSHAKE_ROUNDS", 5000));
  const auto budget = std::chrono::seconds(dc_test::env_u64("DC_HANDSHAKE_SECONDS", 20));
  const auto deadline = std::chrono::steady_clock::now() + budget;
  unsigned ran = 0, stranded = 0, recovered = 0, twice = 0, producer_scheduled = 0;
  unsigned raced = 0, before_last_take = 0, after_last_take = 0;
  unsigned staircase = 96;
  dc_test::set_main_thread();
  for (unsigned r = 0; r < rounds && stranded == 0 && std::chrono::steady_clock::now() < deadline;
       ++r) {
    dc_test::reset_host(32, 0, r);
    dc::BasicQueue<TypeParam> q(dc_test::host());
    Round<TypeParam> round;
    round.consumer_delay = 64;
    const unsigned producer_delay = staircase + r % 3;
    unsigned char second_hits = 0, third_hits = 0;
    dc::DeferredCleanupItem first, second, third;
    dc::init_item(first, &round, &release_producer<TypeParam>);
    dc::init_item(second, &second_hits, &dc_test::count_cleanup);
    dc::init_item(third, &third_hits, &dc_test::count_cleanup);
    EXPECT_EQ(dc::on_user_object_destroyed(q, &first), dc::ScheduleResult::scheduled);

    dc::ScheduleResult pr{};
    std::thread producer([&] {
      round.ready.store(1, std::memory_order_seq_cst);
      while (round.released.load(std::memory_order_seq_cst) == 0) {
      }
      round.seen.store(1, std::memory_order_seq_cst);
      spin(producer_delay);
      pr = dc::on_user_object_destroyed(q, &second);
    });
    while (round.ready.load(std::memory_order_seq_cst) == 0) {
      std::this_thread::yield();
    }
    dc_test::run_one();  // the real pending_call, racing with the producer
    producer.join();
    const bool taken_by_that_drain = second_hits == 1;
    dc_test::run_all();  // whatever the producer or the drain's re-check scheduled
    if (round.raced) {
      ++raced;
      before_last_take += taken_by_that_drain;
      after_last_take += !taken_by_that_drain && second_hits == 1;
      if (taken_by_that_drain) {
        staircase += 4;
      } else if (staircase >= 4) {
        staircase -= 4;
      }
    }
    ++ran;
    producer_scheduled += (pr == dc::ScheduleResult::scheduled);
    if (!q.empty_snapshot()) {
      ++stranded;
      // The next wakeup: another destructor path schedules a drain.
      EXPECT_EQ(dc::on_user_object_destroyed(q, &third), dc::ScheduleResult::scheduled);
      dc_test::run_all();
      recovered += second_hits == 1 && third_hits == 1 && q.empty_snapshot();
      if (!q.empty_snapshot()) dc::drain_all(q);  // tidy up: the items live on this frame
    }
    twice += (round.first_hits > 1) + (second_hits > 1) + (third_hits > 1);
  }
  std::printf(
      "[handshake] %s racing push at the end of a drain: %u rounds, %u stranded "
      "(recovered by the next wakeup: %u), %u raced; of those the push was taken by that "
      "drain in %u, by a later call in %u; the producer scheduled in %u\n",
      TypeParam::name, ran, stranded, recovered, raced, before_last_take, after_last_take,
      producer_scheduled);
  EXPECT_GT(ran, 0u);
  EXPECT_EQ(twice, 0u);
  EXPECT_EQ(recovered, stranded);
  if constexpr (TypeParam::variant == dc::Variant::reference) {
    EXPECT_EQ(stranded, 0u) << "an item stayed queued with no pending call (lost wakeup)";
  }
  if (stranded == 0 && raced < 50) {
    GTEST_SKIP() << "only " << raced << " of " << ran << " rounds had both threads running (a "
                 << "loaded machine): the race was hardly run; ProducerDuringADrain still checks "
                 << "the rule";
  }
  if (stranded == 0 && (before_last_take == 0 || after_last_take == 0)) {
    // Not vacuous only if the pushes landed on both sides of the drain's last
    // take; the aim depends on the machine's timing (under ASan on an idle
    // machine every push landed after it).  Then the race was not run as
    // meant: skip with the counts; ProducerDuringADrain still checks the rule.
    GTEST_SKIP() << "pushes landed before the drain's last take in " << before_last_take
                 << " and after it in " << after_last_take << " of " << raced
                 << " raced rounds: the race was not run on both sides";
  }
}

}  // namespace
