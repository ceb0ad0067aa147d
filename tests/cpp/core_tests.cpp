// core_tests.cpp: the C++ core with no Python, one behaviour per test.
//
// Each test builds its own Queue against the fake host (fake_host.hpp) and
// plays the CPython main thread itself: run_one()/run_all() are the eval
// breaker, drain_at_entry() an API entry point.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "deferred_cleanup/callback.hpp"
#include "deferred_cleanup/drain.hpp"
#include "deferred_cleanup/queue.hpp"
#include "deferred_cleanup/scheduling.hpp"
#include "deferred_cleanup/shutdown.hpp"
#include "fake_host.hpp"

namespace dc = deferred_cleanup;

namespace {

// Cleanup that counts its calls in the byte the payload points to.  Only the
// main thread runs cleanups, so a plain byte is right (TSan would report a
// cleanup off the main thread racing with the test's reads).
void count_cleanup(void* payload) noexcept { ++*static_cast<unsigned char*>(payload); }

struct Items {
  explicit Items(std::size_t n) : items(n), hits(n, 0) {
    for (std::size_t i = 0; i < n; ++i) {
      dc::init_item(items[i], &hits[i], &count_cleanup);
    }
  }
  std::size_t cleaned_once() const {
    std::size_t n = 0;
    for (unsigned char h : hits) n += (h == 1);
    return n;
  }
  std::size_t cleaned_twice_or_more() const {
    std::size_t n = 0;
    for (unsigned char h : hits) n += (h > 1);
    return n;
  }
  std::vector<dc::DeferredCleanupItem> items;
  std::vector<unsigned char> hits;
};

class Core : public ::testing::TestWithParam<dc::Variant> {
 protected:
  void SetUp() override {
    dc_test::reset_host(32, 0, 1);
    dc_test::set_main_thread();
  }
  dc::Variant variant() const { return GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(Variants, Core, ::testing::Values(dc::Variant::reference, dc::Variant::seed),
                         [](const auto& info) { return info.param == dc::Variant::reference ? "reference" : "seed"; });

TEST_P(Core, TakeAllReturnsPushOrderAndEmptiesTheList) {
  dc::Queue q(variant(), dc_test::host());
  Items it(3);
  EXPECT_TRUE(q.push(&it.items[0]));   // empty -> non-empty
  EXPECT_FALSE(q.push(&it.items[1]));
  EXPECT_FALSE(q.push(&it.items[2]));
  dc::DeferredCleanupItem* list = q.take_all();
  ASSERT_EQ(list, &it.items[0]);
  ASSERT_EQ(list->next, &it.items[1]);
  ASSERT_EQ(list->next->next, &it.items[2]);
  EXPECT_EQ(list->next->next->next, nullptr);
  EXPECT_EQ(q.take_all(), nullptr);
  EXPECT_TRUE(q.empty_snapshot());
}

TEST_P(Core, ManyCallbacksMakeOnePendingCall) {
  dc::Queue q(variant(), dc_test::host());
  Items it(100);  // more than CPython's 32-slot ring
  for (auto& item : it.items) dc::on_user_object_destroyed(q, &item);
  auto c = dc_test::counters();
  EXPECT_EQ(c.added, 1u);
  EXPECT_EQ(c.max_ours_outstanding, 1u);
  EXPECT_EQ(it.cleaned_once(), 0u);  // nothing runs before the main thread does
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_EQ(it.cleaned_once(), 100u);
  EXPECT_EQ(q.stats.cleaned.load(), 100u);
  EXPECT_FALSE(q.scheduled_snapshot());
}

TEST_P(Core, RefusalGivesTheClaimBackAndKeepsTheItem) {
  dc_test::reset_host(1, 0, 1);
  dc::Queue q(variant(), dc_test::host());
  ASSERT_TRUE(dc_test::add_foreign());  // the ring is full
  Items it(2);
  EXPECT_EQ(dc::on_user_object_destroyed(q, &it.items[0]), dc::ScheduleResult::refused);
  EXPECT_FALSE(q.scheduled_snapshot());
  EXPECT_FALSE(q.empty_snapshot());
  EXPECT_EQ(q.stats.schedule_failures.load(), 1u);
  // The next enqueue retries (and is refused again: still full).
  EXPECT_EQ(dc::on_user_object_destroyed(q, &it.items[1]), dc::ScheduleResult::refused);
  EXPECT_EQ(dc_test::run_all(), 1u);  // the foreign call; ours was never queued
  EXPECT_EQ(it.cleaned_once(), 0u);
  // An entry point: the reference drains directly on the main thread, the
  // seed retries scheduling.
  const dc::EntryAction a = dc::drain_at_entry(q);
  if (variant() == dc::Variant::reference) {
    EXPECT_EQ(a, dc::EntryAction::drained);
    EXPECT_EQ(dc_test::counters().added, 0u);
  } else {
    EXPECT_EQ(a, dc::EntryAction::rescheduled);
    EXPECT_EQ(dc_test::run_all(), 1u);
  }
  EXPECT_EQ(it.cleaned_once(), 2u);
  EXPECT_EQ(it.cleaned_twice_or_more(), 0u);
}

TEST_P(Core, EntryPointOffTheMainThreadOnlyRetries) {
  dc_test::reset_host(1, 0, 1);
  dc::Queue q(variant(), dc_test::host());
  ASSERT_TRUE(dc_test::add_foreign());
  Items it(1);
  EXPECT_EQ(dc::on_user_object_destroyed(q, &it.items[0]), dc::ScheduleResult::refused);
  ASSERT_EQ(dc_test::run_all(), 1u);
  dc::EntryAction a{};
  std::thread other([&] { a = dc::drain_at_entry(q); });
  other.join();
  EXPECT_EQ(a, dc::EntryAction::rescheduled);
  EXPECT_EQ(it.cleaned_once(), 0u);  // nothing cleaned off the main thread
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_EQ(it.cleaned_once(), 1u);
}

TEST_P(Core, ItemPushedDuringADrainIsTakenOrRescheduled) {
  dc::Queue q(variant(), dc_test::host());
  Items it(2);
  // The first item's cleanup pushes the second one, as a producer racing
  // with the drain would; the drain's next take must pick it up.
  struct Ctx {
    dc::Queue* q;
    dc::DeferredCleanupItem* second;
    unsigned char hits = 0;
  } ctx{&q, &it.items[1]};
  dc::DeferredCleanupItem first;
  dc::init_item(first, &ctx, [](void* p) noexcept {
    auto* c = static_cast<Ctx*>(p);
    ++c->hits;
    dc::on_user_object_destroyed(*c->q, c->second);
  });
  dc::on_user_object_destroyed(q, &first);
  dc_test::run_all();
  EXPECT_EQ(ctx.hits, 1);
  EXPECT_EQ(it.hits[1], 1);
  EXPECT_TRUE(q.empty_snapshot());
}

TEST_P(Core, CleanupDirectlyWhenCreationFailed) {
  dc::Queue q(variant(), dc_test::host());
  Items it(1);
  dc::cleanup_directly(q, &it.items[0]);
  EXPECT_EQ(it.hits[0], 1);
  EXPECT_EQ(dc_test::counters().added, 0u);
  EXPECT_EQ(q.stats.direct_cleanups.load(), 1u);
}

// An item embedded in a heap allocation that its own cleanup overwrites
// (poison) and frees, as a real payload owner may: the drain must read `next`
// before running the cleanup, and must run each cleanup once (a second run
// would touch freed memory).  Under AddressSanitizer either mistake is a
// heap-use-after-free report; without it, the poison makes a late read of
// `next` follow a wild pointer.
struct Owned {
  dc::DeferredCleanupItem item;
  std::size_t index = 0;
  std::vector<unsigned char>* hits = nullptr;
};

void free_and_poison(void* payload) noexcept {
  auto* o = static_cast<Owned*>(payload);
  ++(*o->hits)[o->index];
  std::memset(static_cast<void*>(o), 0xA5, sizeof(Owned));
  delete o;
}

Owned* new_owned(std::vector<unsigned char>& hits, std::size_t index) {
  auto* o = new Owned;
  o->index = index;
  o->hits = &hits;
  dc::init_item(o->item, o, &free_and_poison);
  return o;
}

TEST_P(Core, CleanupMayFreeAndPoisonItsItem) {
  dc_test::reset_host(1, 0, 1);
  dc::Queue q(variant(), dc_test::host());
  std::vector<unsigned char> hits(16, 0);
  // Half through the pending call: one call, eight items.
  for (std::size_t i = 0; i < 8; ++i) dc::on_user_object_destroyed(q, &new_owned(hits, i)->item);
  EXPECT_EQ(dc_test::run_all(), 1u);
  // Half refused (the ring is full), then cleaned by an entry point: the
  // reference drains directly, the seed's retry makes the pending call.
  ASSERT_TRUE(dc_test::add_foreign());
  for (std::size_t i = 8; i < 16; ++i) {
    EXPECT_EQ(dc::on_user_object_destroyed(q, &new_owned(hits, i)->item), dc::ScheduleResult::refused);
  }
  EXPECT_EQ(dc_test::run_all(), 1u);  // the foreign call
  dc::drain_at_entry(q);
  dc_test::run_all();
  for (std::size_t i = 0; i < hits.size(); ++i) EXPECT_EQ(hits[i], 1) << "item " << i;
  EXPECT_EQ(q.stats.cleaned.load(), 16u);
  EXPECT_TRUE(q.empty_snapshot());
}

TEST(Shutdown, AfterCloseCallbacksOnlyEnqueueAndAreLeaked) {
  dc_test::reset_host(32, 0, 1);
  dc_test::set_main_thread();
  dc::Queue q(dc::Variant::reference, dc_test::host());
  Items it(3);
  dc::on_user_object_destroyed(q, &it.items[0]);
  const dc::ShutdownOutcome out = dc::shutdown_at_exit(q, std::chrono::seconds(5));
  EXPECT_TRUE(out.gate_clear);
  EXPECT_EQ(out.final_drained, 1u);  // the final drain, interpreter alive
  dc_test::close_host();
  EXPECT_EQ(dc::on_user_object_destroyed(q, &it.items[1]), dc::ScheduleResult::not_accepting);
  EXPECT_EQ(dc::on_user_object_destroyed(q, &it.items[2]), dc::ScheduleResult::not_accepting);
  EXPECT_EQ(dc::drain_at_entry(q), dc::EntryAction::nothing);
  EXPECT_EQ(dc_test::run_all(), 1u);  // the pending call made before shutdown: a no-op now
  EXPECT_EQ(q.stats.pending_calls_ignored.load(), 1u);
  EXPECT_EQ(dc::backstop_at_exit(q), 2u);
  EXPECT_EQ(it.hits[0], 1);
  EXPECT_EQ(it.hits[1], 0);
  EXPECT_EQ(it.hits[2], 0);
  EXPECT_EQ(dc_test::counters().after_close, 0u);
}

// A producer held between the gate check and add_pending_call: the reference
// shutdown must wait for it, so its call lands while the host is alive.
std::atomic<int> g_gate_state{0};  // 0 idle, 1 producer inside the hook, 2 released

void hold_in_gate(const dc::Queue&) {
  g_gate_state.store(1, std::memory_order_seq_cst);
  while (g_gate_state.load(std::memory_order_seq_cst) != 2) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

TEST(Shutdown, WaitsOutAProducerInsideTheGate) {
  dc_test::reset_host(32, 0, 1);
  dc_test::set_main_thread();
  dc_test::set_in_gate_hook(&hold_in_gate);
  g_gate_state.store(0);
  dc::Queue q(dc::Variant::reference, dc_test::host());
  Items it(1);
  std::thread producer([&] { dc::on_user_object_destroyed(q, &it.items[0]); });
  while (g_gate_state.load() != 1) std::this_thread::yield();
  std::thread releaser([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    g_gate_state.store(2);
  });
  const dc::ShutdownOutcome out = dc::shutdown_at_exit(q, std::chrono::seconds(10));
  dc_test::close_host();  // teardown: any call from now on is a violation
  producer.join();
  releaser.join();
  EXPECT_TRUE(out.gate_clear);
  EXPECT_GE(out.waited_us, 10000u);      // it did wait (the releaser sleeps 50 ms)
  EXPECT_EQ(dc_test::counters().after_close, 0u);
  EXPECT_EQ(dc_test::counters().added, 1u);  // the held call landed before teardown
  EXPECT_EQ(it.hits[0], 1);                  // and the final drain cleaned the item
  dc_test::set_in_gate_hook(nullptr);
}

TEST(Shutdown, GateBoundExpiresAndIsCounted) {
  dc_test::reset_host(32, 0, 1);
  dc_test::set_main_thread();
  dc_test::set_in_gate_hook(&hold_in_gate);
  g_gate_state.store(0);
  dc::Queue q(dc::Variant::reference, dc_test::host());
  Items it(1);
  std::thread producer([&] { dc::on_user_object_destroyed(q, &it.items[0]); });
  while (g_gate_state.load() != 1) std::this_thread::yield();
  const dc::ShutdownOutcome out = dc::shutdown_at_exit(q, std::chrono::milliseconds(20));
  EXPECT_FALSE(out.gate_clear);
  EXPECT_EQ(q.stats.gate_timeouts.load(), 1u);
  g_gate_state.store(2);
  producer.join();
  dc_test::set_in_gate_hook(nullptr);
  EXPECT_EQ(it.hits[0], 1);  // the item was pushed before the gate: the final drain took it
  EXPECT_EQ(dc_test::run_all(), 1u);  // the late pending call runs as a no-op: host dead
  EXPECT_EQ(q.stats.pending_calls_ignored.load(), 1u);
  EXPECT_EQ(it.hits[0], 1);
  EXPECT_EQ(dc::backstop_at_exit(q), 0u);
}

}  // namespace
