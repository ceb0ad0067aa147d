// SPDX-License-Identifier: Apache-2.0
// core_tests.cpp: the C++ core with no Python, one behaviour per test.
//
// Each test builds its own BasicQueue<P> against the fake host (fake_host.hpp)
// and plays the CPython main thread itself: run_one()/run_all() are the eval
// breaker, drain_at_entry() an API entry point.  Typed tests run for the three
// variants (ReferencePolicy, SeedPolicy = the PR #2371 text, CudaCore12Policy =
// the cuda-core 1.2.0 wheel); where the variants differ, each branch asserts
// that variant's own documented behaviour (policy.hpp, drain.hpp).
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
#include "test_support.hpp"

namespace dc = deferred_cleanup;
using dc_test::Items;

namespace {

constexpr bool kIsReference(dc::Variant v) { return v == dc::Variant::reference; }

template <class P>
class Core : public ::testing::Test {
 protected:
  void SetUp() override {
    dc_test::reset_host(32, 0, 1);
    dc_test::set_main_thread();
  }
};
TYPED_TEST_SUITE(Core, dc_test::AllPolicies, dc_test::PolicyName);

TYPED_TEST(Core, TakeAllReturnsPushOrderAndEmptiesTheList) {
  dc::BasicQueue<TypeParam> q(dc_test::host());
  Items it(3);
  EXPECT_TRUE(q.push(&it.items[0]));  // empty -> non-empty
  EXPECT_FALSE(q.push(&it.items[1]));
  EXPECT_FALSE(q.push(&it.items[2]));
  EXPECT_EQ(q.count_queued(), 3u);
  dc::DeferredCleanupItem* list = q.take_all();
  ASSERT_EQ(list, &it.items[0]);
  ASSERT_EQ(list->next, &it.items[1]);
  ASSERT_EQ(list->next->next, &it.items[2]);
  EXPECT_EQ(list->next->next->next, nullptr);
  EXPECT_EQ(q.take_all(), nullptr);
  EXPECT_TRUE(q.empty_snapshot());
}

TYPED_TEST(Core, ACallbackLinksItsItemIntoTheQueueOnce) {
  dc::BasicQueue<TypeParam> q(dc_test::host());
  Items it(2);
  dc::on_user_object_destroyed(q, &it.items[0]);
  dc::on_user_object_destroyed(q, &it.items[1]);
  // Before any drain the queue is items[1] -> items[0] -> end.  An item
  // pushed a second time links to itself, and a drain would run its cleanup
  // forever: the links are checked first, and the drain runs only if they hold.
  ASSERT_EQ(it.items[1].next, &it.items[0]);
  ASSERT_EQ(it.items[0].next, nullptr);
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_EQ(it.cleaned_once(), 2u);
  EXPECT_EQ(it.cleaned_twice_or_more(), 0u);
}

TYPED_TEST(Core, ManyCallbacksMakeOnePendingCall) {
  dc::BasicQueue<TypeParam> q(dc_test::host());
  Items it(100);  // more than CPython's 32-slot ring
  EXPECT_EQ(dc::on_user_object_destroyed(q, &it.items[0]), dc::ScheduleResult::scheduled);
  for (std::size_t i = 1; i < it.items.size(); ++i) {
    EXPECT_EQ(dc::on_user_object_destroyed(q, &it.items[i]), dc::ScheduleResult::already_scheduled);
  }
  auto c = dc_test::counters();
  EXPECT_EQ(c.added, 1u);
  EXPECT_EQ(c.max_ours_outstanding, 1u);
  EXPECT_EQ(it.cleaned_once(), 0u);  // nothing runs before the main thread does
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_EQ(it.cleaned_once(), 100u);
  EXPECT_EQ(q.stats.cleaned.load(), 100u);
  EXPECT_FALSE(q.scheduled_snapshot());
  EXPECT_TRUE(q.empty_snapshot());
  // The next item makes a new pending call: the path is open again.
  Items more(1);
  EXPECT_EQ(dc::on_user_object_destroyed(q, &more.items[0]), dc::ScheduleResult::scheduled);
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_EQ(more.hits[0], 1);
}

TYPED_TEST(Core, CleanupsRunInPushOrderOnTheMainThread) {
  dc::BasicQueue<TypeParam> q(dc_test::host());
  struct Rec {
    std::vector<int>* order;
    int id;
    std::thread::id main;
    int* off_main;
  };
  std::vector<int> order;
  int off_main = 0;
  std::vector<Rec> recs;
  recs.reserve(50);
  std::vector<dc::DeferredCleanupItem> items(50);
  for (int i = 0; i < 50; ++i) {
    recs.push_back({&order, i, std::this_thread::get_id(), &off_main});
    dc::init_item(items[i], &recs[i], [](void* p) noexcept {
      auto* r = static_cast<Rec*>(p);
      r->order->push_back(r->id);
      if (std::this_thread::get_id() != r->main) ++*r->off_main;
    });
  }
  // Pushed from another thread (a driver thread), run on this one.
  std::thread driver([&] {
    for (auto& item : items) dc::on_user_object_destroyed(q, &item);
  });
  driver.join();
  EXPECT_TRUE(order.empty());
  dc_test::run_all();
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i) << "not FIFO at " << i;
  EXPECT_EQ(off_main, 0);
}

TYPED_TEST(Core, RefusalGivesTheClaimBackAndKeepsTheItem) {
  dc_test::reset_host(1, 0, 1);
  dc::BasicQueue<TypeParam> q(dc_test::host());
  ASSERT_TRUE(dc_test::add_foreign());  // the ring is full
  Items it(2);
  EXPECT_EQ(dc::on_user_object_destroyed(q, &it.items[0]), dc::ScheduleResult::refused);
  EXPECT_FALSE(q.scheduled_snapshot());
  EXPECT_FALSE(q.empty_snapshot());
  EXPECT_EQ(q.stats.schedule_failures.load(), 1u);
  // The next enqueue retries (and is refused again: still full).
  EXPECT_EQ(dc::on_user_object_destroyed(q, &it.items[1]), dc::ScheduleResult::refused);
  EXPECT_EQ(q.stats.schedule_failures.load(), 2u);
  EXPECT_EQ(dc_test::run_all(), 1u);  // the foreign call; ours was never queued
  EXPECT_EQ(it.cleaned_once(), 0u);
  // An entry point on the main thread: the reference drains directly
  // (gh-95820), the comparison variants retry scheduling (cuda-core 1.2.0's
  // retry_deferred_cleanup only calls schedule()).
  const dc::EntryAction a = dc::drain_at_entry(q);
  if constexpr (kIsReference(TypeParam::variant)) {
    EXPECT_EQ(a, dc::EntryAction::drained);
    EXPECT_EQ(dc_test::counters().added, 0u);
    EXPECT_EQ(q.stats.direct_drains.load(), 1u);
  } else {
    EXPECT_EQ(a, dc::EntryAction::rescheduled);
    EXPECT_EQ(it.cleaned_once(), 0u);
    EXPECT_EQ(dc_test::run_all(), 1u);
  }
  EXPECT_EQ(it.cleaned_once(), 2u);
  EXPECT_EQ(it.cleaned_twice_or_more(), 0u);
}

TYPED_TEST(Core, EntryPointOffTheMainThreadOnlyRetries) {
  dc_test::reset_host(1, 0, 1);
  dc::BasicQueue<TypeParam> q(dc_test::host());
  ASSERT_TRUE(dc_test::add_foreign());
  Items it(1);
  EXPECT_EQ(dc::on_user_object_destroyed(q, &it.items[0]), dc::ScheduleResult::refused);
  ASSERT_EQ(dc_test::run_all(), 1u);
  dc::EntryAction a{};
  std::thread other([&] { a = dc::drain_at_entry(q); });
  other.join();
  EXPECT_EQ(a, dc::EntryAction::rescheduled);
  EXPECT_EQ(it.cleaned_once(), 0u);  // nothing cleaned off the main thread
  EXPECT_EQ(dc_test::counters().added, 1u);
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_EQ(it.cleaned_once(), 1u);
}

TYPED_TEST(Core, ItemPushedDuringADrainIsTakenOrRescheduled) {
  dc::BasicQueue<TypeParam> q(dc_test::host());
  Items it(2);
  // The first item's cleanup runs the real destructor path for the second
  // one, as a producer racing with the drain would: after the reference's
  // clear (so its producer schedules anew) and before the comparison
  // variants' next take (so the take loop picks it up).
  struct Ctx {
    dc::BasicQueue<TypeParam>* q;
    dc::DeferredCleanupItem* second;
    unsigned char hits = 0;
    dc::ScheduleResult nested{};
  } ctx{&q, &it.items[1]};
  dc::DeferredCleanupItem first;
  dc::init_item(first, &ctx, [](void* p) noexcept {
    auto* c = static_cast<Ctx*>(p);
    ++c->hits;
    c->nested = dc::on_user_object_destroyed(*c->q, c->second);
  });
  dc::on_user_object_destroyed(q, &first);
  ASSERT_EQ(dc_test::run_one(), true);
  EXPECT_EQ(ctx.hits, 1);
  EXPECT_EQ(it.hits[1], 1);  // taken by the same drain's next take
  if constexpr (kIsReference(TypeParam::variant)) {
    // scheduled_ was cleared before the take: the producer scheduled again.
    EXPECT_EQ(ctx.nested, dc::ScheduleResult::scheduled);
  } else {
    // scheduled_ is still true during the take loop: no second call.
    EXPECT_EQ(ctx.nested, dc::ScheduleResult::already_scheduled);
  }
  dc_test::run_all();
  EXPECT_EQ(it.hits[1], 1);
  EXPECT_TRUE(q.empty_snapshot());
  EXPECT_LE(dc_test::counters().max_ours_outstanding, 1u);
}

// A cleanup that calls drain_all() again (an entry point inside a cleanup
// does) gets 0 at once: the outer drain takes what was pushed meanwhile, so
// every item runs once and in push order, and the drain flag stays set until
// the outer drain ends.
TYPED_TEST(Core, DrainAllInsideADrainReturnsAtOnce) {
  dc::BasicQueue<TypeParam> q(dc_test::host());
  Items it(1);
  struct Ctx {
    dc::BasicQueue<TypeParam>* q;
    dc::DeferredCleanupItem* late;
    const unsigned char* late_hits;
    std::size_t nested = 99;
    unsigned char late_hits_inside = 99;
    bool draining_inside = false;
  } ctx{&q, &it.items[0], &it.hits[0]};
  dc::DeferredCleanupItem first;
  dc::init_item(first, &ctx, [](void* p) noexcept {
    auto* c = static_cast<Ctx*>(p);
    dc::on_user_object_destroyed(*c->q, c->late);  // pushed during the drain
    c->nested = dc::drain_all(*c->q);
    c->late_hits_inside = *c->late_hits;
    c->draining_inside = c->q->draining();
  });
  dc::on_user_object_destroyed(q, &first);
  EXPECT_EQ(dc::drain_all(q), 2u);  // the main thread's drain takes both
  EXPECT_EQ(ctx.nested, 0u);        // the nested call took nothing
  EXPECT_EQ(ctx.late_hits_inside, 0);
  EXPECT_TRUE(ctx.draining_inside);
  EXPECT_FALSE(q.draining());
  EXPECT_EQ(it.hits[0], 1);
  dc_test::run_all();
  EXPECT_EQ(it.hits[0], 1);
}

// The early stop (Host::stop_drain, drain.hpp run_list): the drain stops after
// the cleanup the host names, puts the rest back in its order and re-arms a
// pending call, which runs each of them once.
TYPED_TEST(Core, AStoppedDrainPutsTheRestBackInOrderWithAPendingCall) {
  dc::BasicQueue<TypeParam> q(dc_test::host());
  struct Rec {
    std::vector<int>* order;
    int i;
  };
  std::vector<int> order;
  std::vector<Rec> recs;
  for (int i = 0; i < 5; ++i) recs.push_back({&order, i});
  std::vector<dc::DeferredCleanupItem> items(5);
  for (int i = 0; i < 5; ++i) {
    dc::init_item(items[i], &recs[i], [](void* p) noexcept {
      auto* r = static_cast<Rec*>(p);
      r->order->push_back(r->i);
    });
    q.push(&items[i]);
  }
  dc_test::stop_drain_after(2);
  EXPECT_EQ(dc::drain_all(q), 2u);  // stopped after the second cleanup
  EXPECT_EQ(order, (std::vector<int>{0, 1}));
  EXPECT_FALSE(q.empty_snapshot());     // the rest is queued again
  EXPECT_TRUE(q.scheduled_snapshot());  // with a pending call claimed for it
  EXPECT_FALSE(q.draining());
  dc_test::run_all();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));  // each once, in order
  EXPECT_TRUE(q.empty_snapshot());
}

// One claim, one winner: a second schedule() while the first claim's call is
// outstanding loses the claim and adds no call.  (The fast path never reaches
// claim() when it reads the flag set, so only racing producers, or this
// direct call, meet a claim already taken.)
TYPED_TEST(Core, ASecondClaimantLosesTheClaim) {
  dc::BasicQueue<TypeParam> q(dc_test::host());
  Items it(1);
  q.push(&it.items[0]);
  EXPECT_EQ(dc::schedule(q), dc::ScheduleResult::scheduled);
  EXPECT_EQ(dc::schedule(q), dc::ScheduleResult::already_scheduled);
  EXPECT_EQ(dc_test::counters().added, 1u);
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_EQ(it.hits[0], 1);
}

TYPED_TEST(Core, CleanupDirectlyWhenCreationFailed) {
  dc::BasicQueue<TypeParam> q(dc_test::host());
  Items it(1);
  dc::cleanup_directly(q, &it.items[0]);
  EXPECT_EQ(it.hits[0], 1);
  EXPECT_EQ(dc_test::counters().added, 0u);
  EXPECT_EQ(q.stats.direct_cleanups.load(), 1u);
  EXPECT_EQ(q.stats.cleaned.load(), 1u);
}

// ----------------------------------------------- cleanups that free the item
//
// A cleanup usually frees the allocation that embeds the item, so the drain
// must read `next` before calling it.  These cleanups poison the whole node
// (0xdb) and then either free it (heap: AddressSanitizer reports any later
// read, .ci/asan.sh) or, in a pool, point `next` at a trap item whose cleanup
// is counted (a value check that fails in any build).
struct PoisonLog {
  std::vector<std::uint64_t> order;
  std::thread::id main;
  unsigned off_main = 0;
  unsigned trap_hits = 0;
};
PoisonLog g_poison;

struct Node {
  std::uint64_t id;
  std::uint64_t pad[2];  // the allocator's free-list words land here, not on `item`
  dc::DeferredCleanupItem item;
};

dc::DeferredCleanupItem g_trap;

void record(const Node* n) {
  g_poison.order.push_back(n->id);
  if (std::this_thread::get_id() != g_poison.main) ++g_poison.off_main;
}

void free_and_poison(void* p) noexcept {
  Node* n = static_cast<Node*>(p);
  record(n);
  std::memset(static_cast<void*>(n), 0xdb, sizeof *n);
  delete n;
}

void poison_to_trap(void* p) noexcept {
  Node* n = static_cast<Node*>(p);
  record(n);
  std::memset(static_cast<void*>(n), 0xdb, sizeof *n);
  n->item.next = &g_trap;  // a drain that reads next now runs the trap
}

void trap_cleanup(void*) noexcept { ++g_poison.trap_hits; }

enum class Way { pending_call, drain_all, entry_point };

template <class P>
void poison_round(Way way, bool heap) {
  dc_test::reset_host(32, 0, 1);
  dc_test::set_main_thread();
  g_poison = PoisonLog{};
  g_poison.main = std::this_thread::get_id();
  dc::init_item(g_trap, nullptr, &trap_cleanup);
  dc::BasicQueue<P> q(dc_test::host());
  constexpr int kN = 6;
  std::vector<Node> pool(heap ? 0 : kN);
  for (int i = 0; i < kN; ++i) {
    Node* n = heap ? new Node{} : &pool[i];
    n->id = static_cast<std::uint64_t>(i);
    dc::init_item(n->item, n, heap ? &free_and_poison : &poison_to_trap);
    if (way == Way::pending_call) {
      dc::on_user_object_destroyed(q, &n->item);
    } else {
      q.push(&n->item);
    }
  }
  switch (way) {
    case Way::pending_call:
      EXPECT_EQ(dc_test::run_all(), 1u);
      break;
    case Way::drain_all:
      EXPECT_EQ(dc::drain_all(q), static_cast<std::size_t>(kN));
      break;
    case Way::entry_point:
      EXPECT_EQ(dc::drain_at_entry(q), dc::EntryAction::drained);
      break;
  }
  EXPECT_EQ(g_poison.trap_hits, 0u) << "the drain read `next` after the cleanup";
  ASSERT_EQ(g_poison.order.size(), static_cast<std::size_t>(kN));
  for (int i = 0; i < kN; ++i) EXPECT_EQ(g_poison.order[i], static_cast<std::uint64_t>(i));
  EXPECT_EQ(g_poison.off_main, 0u);
  EXPECT_EQ(q.stats.cleaned.load(), static_cast<std::uint64_t>(kN));
  EXPECT_TRUE(q.empty_snapshot());
}

TYPED_TEST(Core, PendingCallNeverReadsAFreedItem) {
  poison_round<TypeParam>(Way::pending_call, /*heap=*/true);
  poison_round<TypeParam>(Way::pending_call, /*heap=*/false);
}

TYPED_TEST(Core, DrainAllNeverReadsAFreedItem) {
  poison_round<TypeParam>(Way::drain_all, true);
  poison_round<TypeParam>(Way::drain_all, false);
}

TEST(Reference, DirectDrainNeverReadsAFreedItem) {
  poison_round<dc::ReferencePolicy>(Way::entry_point, true);
  poison_round<dc::ReferencePolicy>(Way::entry_point, false);
}

// Ported from the `mutate` branch (tests/cpp/core_tests.cpp there, commit
// 4f5d52a): heap items that their own cleanup poisons and frees, half through
// a pending call, half refused (full ring) and then cleaned through an entry
// point: the reference drains directly, the comparison variants' retry makes
// the pending call.
struct Owned {
  dc::DeferredCleanupItem item;
  std::size_t index = 0;
  std::vector<unsigned char>* hits = nullptr;
};

void owned_free_and_poison(void* payload) noexcept {
  auto* o = static_cast<Owned*>(payload);
  ++(*o->hits)[o->index];
  std::memset(static_cast<void*>(o), 0xA5, sizeof(Owned));
  delete o;
}

Owned* new_owned(std::vector<unsigned char>& hits, std::size_t index) {
  auto* o = new Owned;
  o->index = index;
  o->hits = &hits;
  dc::init_item(o->item, o, &owned_free_and_poison);
  return o;
}

TYPED_TEST(Core, CleanupMayFreeAndPoisonItsItemAlsoAfterARefusal) {
  dc_test::reset_host(1, 0, 1);
  dc::BasicQueue<TypeParam> q(dc_test::host());
  std::vector<unsigned char> hits(16, 0);
  for (std::size_t i = 0; i < 8; ++i) dc::on_user_object_destroyed(q, &new_owned(hits, i)->item);
  EXPECT_EQ(dc_test::run_all(), 1u);
  ASSERT_TRUE(dc_test::add_foreign());
  for (std::size_t i = 8; i < 16; ++i) {
    EXPECT_EQ(dc::on_user_object_destroyed(q, &new_owned(hits, i)->item),
              dc::ScheduleResult::refused);
  }
  EXPECT_EQ(dc_test::run_all(), 1u);  // the foreign call
  dc::drain_at_entry(q);
  dc_test::run_all();
  for (std::size_t i = 0; i < hits.size(); ++i) EXPECT_EQ(hits[i], 1) << "item " << i;
  EXPECT_EQ(q.stats.cleaned.load(), 16u);
  EXPECT_TRUE(q.empty_snapshot());
}

// ------------------------------------------------------------- the backstop

TYPED_TEST(Core, BackstopCountsWithoutTaking) {
  dc::BasicQueue<TypeParam> q(dc_test::host());
  Items it(3);
  for (auto& item : it.items) q.push(&item);
  EXPECT_EQ(dc::backstop_at_exit(q), 3u);
  EXPECT_EQ(q.stats.leaked_at_shutdown.load(), 3u);
  EXPECT_EQ(it.cleaned_once(), 0u);       // counted, not cleaned
  EXPECT_EQ(q.count_queued(), 3u);        // and not taken
  ASSERT_EQ(q.take_all(), &it.items[0]);  // the list is intact, in push order
  EXPECT_EQ(it.items[0].next, &it.items[1]);
  EXPECT_EQ(it.items[1].next, &it.items[2]);
  EXPECT_EQ(dc_test::counters().added, 0u);
  // Only the seed's backstop is a shutdown step of its own (the PR #2371
  // text's Py_AtExit callback stops accepting_); for the others it changes
  // nothing.
  EXPECT_EQ(q.accepting(), !TypeParam::close_at_py_atexit);
  Items late(1);
  const dc::ScheduleResult r = dc::on_user_object_destroyed(q, &late.items[0]);
  if constexpr (TypeParam::close_at_py_atexit) {
    EXPECT_EQ(r, dc::ScheduleResult::not_accepting);
    EXPECT_EQ(dc_test::counters().added, 0u);
  } else {
    EXPECT_EQ(r, dc::ScheduleResult::scheduled);
  }
}

// ------------------------------------------------------ finalizing (shipped)

TYPED_TEST(Core, FinalizingHostAtScheduleTime) {
  dc::BasicQueue<TypeParam> q(dc_test::host());
  dc_test::set_finalizing(true);
  Items it(1);
  const dc::ScheduleResult r = dc::on_user_object_destroyed(q, &it.items[0]);
  if constexpr (TypeParam::schedule_checks_finalizing) {
    // cuda-core 1.2.0: schedule() sees finalization, stops and returns.
    EXPECT_EQ(r, dc::ScheduleResult::not_accepting);
    EXPECT_FALSE(q.accepting());
    EXPECT_EQ(dc_test::counters().added, 0u);
    EXPECT_EQ(q.count_queued(), 1u);  // pushed anyway, never cleaned
    EXPECT_EQ(dc::drain_at_entry(q), dc::EntryAction::nothing);
  } else {
    // The reference and the PR text do not ask at schedule time.
    EXPECT_EQ(r, dc::ScheduleResult::scheduled);
  }
  dc_test::run_all();
  if constexpr (TypeParam::drain_checks_finalizing) {
    EXPECT_EQ(it.hits[0], 0);  // the drain leaks intact payloads
    EXPECT_EQ(q.count_queued(), 1u);
    EXPECT_FALSE(q.accepting());
  } else {
    EXPECT_EQ(it.hits[0], 1);  // the reference ignores the host's finalizing flag
  }
}

TYPED_TEST(Core, DrainThatFindsTheHostFinalizing) {
  dc::BasicQueue<TypeParam> q(dc_test::host());
  Items it(2);
  EXPECT_EQ(dc::on_user_object_destroyed(q, &it.items[0]), dc::ScheduleResult::scheduled);
  dc_test::set_finalizing(true);  // between the call's addition and its run
  EXPECT_EQ(dc_test::run_all(), 1u);
  if constexpr (TypeParam::drain_checks_finalizing) {
    EXPECT_EQ(it.hits[0], 0);
    EXPECT_EQ(q.stats.leaked_finalizing.load(), 1u);
    EXPECT_FALSE(q.scheduled_snapshot());  // cleared, as shipped
    EXPECT_FALSE(q.accepting());           // stopped
    EXPECT_EQ(dc::on_user_object_destroyed(q, &it.items[1]), dc::ScheduleResult::not_accepting);
    EXPECT_EQ(dc::backstop_at_exit(q), 2u);
  } else {
    EXPECT_EQ(it.hits[0], 1);
    EXPECT_EQ(q.stats.leaked_finalizing.load(), 0u);
  }
}

// ------------------------------------------------ a lost call (comparison)

template <class P>
class Comparison : public Core<P> {};
TYPED_TEST_SUITE(Comparison, dc_test::ComparisonPolicies, dc_test::PolicyName);

// The comparison variants have no re-arm rule: a pending call that CPython
// accepted and never runs leaves scheduled_ true for good, and neither later
// enqueues nor entry points (which only call schedule()) make another call.
TYPED_TEST(Comparison, LostCallIsNeverRecovered) {
  dc::BasicQueue<TypeParam> q(dc_test::host());
  dc_test::lose_next(1);
  Items it(40);
  EXPECT_EQ(dc::on_user_object_destroyed(q, &it.items[0]), dc::ScheduleResult::scheduled);
  EXPECT_EQ(dc_test::counters().lost, 1u);
  for (std::size_t i = 1; i < it.items.size(); ++i) {
    dc_test::advance_clock(10'000'000'000);  // ten seconds each: no clock is asked anyway
    EXPECT_EQ(dc::on_user_object_destroyed(q, &it.items[i]), dc::ScheduleResult::already_scheduled);
    EXPECT_EQ(dc::drain_at_entry(q), dc::EntryAction::rescheduled);
  }
  EXPECT_EQ(dc_test::run_all(), 0u);
  EXPECT_EQ(dc_test::counters().added, 1u);
  EXPECT_EQ(it.cleaned_once(), 0u);
  EXPECT_EQ(q.count_queued(), 40u);
}

// ------------------------------------------------- sampling the stale-claim check

// The producer's fast path looks at the claim's age for about one item in
// 2^ReferencePolicy::rearm_sample_log2 (sample_stale_check, callback.hpp;
// policy.hpp states the rate).  The reference's rate is a decision
// (docs/design/callback.rst, "Sampling the stale-claim check"): one
// fast-path hit in 64, for the look's cost on one producer.  This test pins
// it: over 2^16 fixed addresses at each of four strides, the sampled
// fraction at the policy's rate is within 0.8x to 1.25x of 1/64 (measured:
// 1056, 1006, 1091 and 1046 of 65536 at 16, 48, 64 and 4096 bytes; four
// times that rate samples about 4096).  The pointers are only hashed, never
// dereferenced.
TEST(SampleStaleCheck, SamplesOneFastPathHitIn64) {
  constexpr unsigned kLog2 = dc::ReferencePolicy::rearm_sample_log2;
  constexpr int kAddresses = 1 << 16;
  constexpr double kDecided = 1.0 / 64;  // docs/design/callback.rst
  for (std::uintptr_t stride : {16u, 48u, 64u, 4096u}) {
    int sampled = 0;
    for (int k = 0; k < kAddresses; ++k) {
      const auto* item = reinterpret_cast<const dc::DeferredCleanupItem*>(
          std::uintptr_t{0x7f3a00000000} + static_cast<std::uintptr_t>(k) * stride);
      sampled += dc::sample_stale_check<kLog2>(item) ? 1 : 0;
    }
    const double rate = static_cast<double>(sampled) / kAddresses;
    EXPECT_GT(rate, 0.8 * kDecided)
        << "stride " << stride << ": " << sampled << " sampled of " << kAddresses;
    EXPECT_LT(rate, 1.25 * kDecided)
        << "stride " << stride << ": " << sampled << " sampled of " << kAddresses;
  }
}

// Whatever the allocator's stride, a burst at a regular stride holds no
// sampled item about as rarely as as many random addresses would.  The
// bursts are long enough for the policy's rate that an empty one is rare
// with a good hash: 400 items, (1 - 1/64)^400, about 0.2 %.  The addresses
// are fixed, so the counts are too; the bounds leave room above the
// binomial expectation (0.12 empty bursts of 64 per stride, 7.6 of 4096 in
// all; measured: 8 of 4096, at most 1 per stride), and a single multiply
// exceeds them (measured at this rate: 38 of 64 bursts empty at a 304-byte
// stride, 36 at 272 bytes, 29 at 608 bytes, 189 of 4096 in all).  The
// pointers are only hashed, never dereferenced.
TEST(SampleStaleCheck, BurstsAtAnyStrideHoldASampledItem) {
  constexpr unsigned kLog2 = dc::ReferencePolicy::rearm_sample_log2;
  constexpr int kBursts = 64, kBurst = 400;
  int empty_total = 0;
  for (std::uintptr_t stride = 16; stride <= 1024; stride += 16) {
    int empty = 0;
    for (int j = 0; j < kBursts; ++j) {
      const std::uintptr_t base =
          (std::uintptr_t{0x7f3a00000000} + static_cast<std::uintptr_t>(j) * 0x1235670u) &
          ~std::uintptr_t{15};
      int sampled = 0;
      for (int k = 0; k < kBurst; ++k) {
        const auto* item = reinterpret_cast<const dc::DeferredCleanupItem*>(
            base + static_cast<std::uintptr_t>(k) * stride);
        sampled += dc::sample_stale_check<kLog2>(item) ? 1 : 0;
      }
      empty += sampled == 0 ? 1 : 0;
    }
    EXPECT_LE(empty, 4) << "stride " << stride << ": bursts of " << kBurst
                        << " with no sampled item, of " << kBursts;
    empty_total += empty;
  }
  EXPECT_LE(empty_total, 41) << "bursts with no sampled item (1 % of 4096)";
}

// ------------------------------------------------- re-arming (reference only)

class Rearm : public ::testing::Test {
 protected:
  void SetUp() override {
    dc_test::reset_host(32, 0, 1);
    dc_test::set_main_thread();
    q_.settings.stale_claim_ns.store(kBound);
    // Items whose address makes the producer look at the claim's age (one in
    // 2^rearm_sample_log2, callback.hpp): the real sampling function, at the
    // policy's rate, picks them; the pool is large enough to hold many.
    constexpr unsigned kLog2 = dc::ReferencePolicy::rearm_sample_log2;
    for (std::size_t i = 0; i < pool_.items.size(); ++i) {
      (dc::sample_stale_check<kLog2>(&pool_.items[i]) ? sampled_ : plain_).push_back(i);
    }
    ASSERT_GE(sampled_.size(), 6u);
    ASSERT_GE(plain_.size(), 4u);
  }
  dc::DeferredCleanupItem* sampled(std::size_t k) { return &pool_.items[sampled_.at(k)]; }
  dc::DeferredCleanupItem* plain(std::size_t k) { return &pool_.items[plain_.at(k)]; }
  std::size_t cleaned() const { return pool_.cleaned_once(); }
  // The first re-arm check that looks at a claim whose call was added starts
  // its stale clock (rearm.hpp: a claim is stale once it has been SEEN
  // outstanding for the bound; the claimant reads no clock).  This look is
  // the one a sampled producer or an entry point makes; it never re-arms
  // while the bound is positive.
  void first_look() {
    EXPECT_EQ(q_.rearm.claimed_at(), dc::kClaimUntimed) << "the claim was not added-untimed";
    EXPECT_EQ(dc::rearm_if_stale(q_), dc::ScheduleResult::already_scheduled);
    EXPECT_NE(q_.rearm.claimed_at(), dc::kClaimUntimed) << "the first look did not time the claim";
  }

  static constexpr std::int64_t kBound = 1'000'000;  // 1 ms of the fake clock
  dc::ReferenceQueue q_{dc_test::host()};
  Items pool_{4096};  // about 64 sampled at one in 64, at least 6 needed
  std::vector<std::size_t> sampled_, plain_;
};

TEST_F(Rearm, LostCallRecoveredByALaterEnqueueAfterTheStaleBound) {
  dc_test::lose_next(1);
  EXPECT_EQ(dc::on_user_object_destroyed(q_, plain(0)), dc::ScheduleResult::scheduled);
  EXPECT_EQ(dc_test::counters().lost, 1u);
  EXPECT_EQ(dc_test::run_all(), 0u);  // nothing to run: the call was lost
  first_look();                       // the stale clock starts here, not at the add
  // Before the bound: a sampled producer looks, and leaves the claim alone.
  dc_test::advance_clock(kBound - 1);
  EXPECT_EQ(dc::on_user_object_destroyed(q_, sampled(0)), dc::ScheduleResult::already_scheduled);
  EXPECT_EQ(dc::on_user_object_destroyed(q_, plain(1)), dc::ScheduleResult::already_scheduled);
  EXPECT_EQ(dc_test::counters().added, 1u);
  // At the bound: a producer that does not sample does not look ...
  dc_test::advance_clock(1);
  EXPECT_EQ(dc::on_user_object_destroyed(q_, plain(2)), dc::ScheduleResult::already_scheduled);
  // ... one that samples re-arms: a second pending call.
  EXPECT_EQ(dc::on_user_object_destroyed(q_, sampled(1)), dc::ScheduleResult::rearmed);
  EXPECT_EQ(q_.stats.rearms.load(), 1u);
  EXPECT_EQ(dc_test::counters().added, 2u);
  EXPECT_EQ(cleaned(), 0u);
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_EQ(cleaned(), 5u);  // every queued item, once
  EXPECT_FALSE(q_.scheduled_snapshot());
  // The pending-call path works again.
  EXPECT_EQ(dc::on_user_object_destroyed(q_, plain(3)), dc::ScheduleResult::scheduled);
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_EQ(cleaned(), 6u);
  EXPECT_EQ(pool_.cleaned_twice_or_more(), 0u);
  EXPECT_LE(dc_test::counters().max_ours_outstanding, 2u);
}

// The stale clock starts at the first look, not at the add (rearm.hpp, "When
// a claim is stale"): the claimant reads no clock and only marks its claim
// added-untimed, so a claim nobody looks at does not go stale on its own,
// however old its call.  The first look starts the clock and does not
// re-arm; a look at least one bound after it does.
TEST_F(Rearm, StaleClockStartsAtTheFirstLookNotAtTheAdd) {
  dc_test::lose_next(1);
  EXPECT_EQ(dc::on_user_object_destroyed(q_, plain(0)), dc::ScheduleResult::scheduled);
  EXPECT_EQ(q_.rearm.claimed_at(), dc::kClaimUntimed) << "the claimant timed its claim";
  EXPECT_EQ(dc_test::run_all(), 0u);  // the call was lost
  // Long past the bound, with producers that do not look: still untimed.
  for (std::size_t k = 1; k <= 3; ++k) {
    dc_test::advance_clock(100 * kBound);
    EXPECT_EQ(dc::on_user_object_destroyed(q_, plain(k)), dc::ScheduleResult::already_scheduled);
  }
  EXPECT_EQ(q_.rearm.claimed_at(), dc::kClaimUntimed) << "a claim nobody looked at went stale";
  // The first look, 300 bounds after the add, only starts the clock.
  EXPECT_EQ(dc::on_user_object_destroyed(q_, sampled(0)), dc::ScheduleResult::already_scheduled)
      << "stale from the add: the first look re-armed";
  EXPECT_NE(q_.rearm.claimed_at(), dc::kClaimUntimed);
  EXPECT_NE(q_.rearm.claimed_at(), 0);
  EXPECT_EQ(q_.stats.rearms.load(), 0u);
  // Seen outstanding for less than the bound: not stale.
  dc_test::advance_clock(kBound - 1);
  EXPECT_EQ(dc::on_user_object_destroyed(q_, sampled(1)), dc::ScheduleResult::already_scheduled);
  EXPECT_EQ(dc_test::counters().added, 1u);
  // The first look plus the bound: stale, re-armed, and the path works again.
  dc_test::advance_clock(1);
  EXPECT_EQ(dc::on_user_object_destroyed(q_, sampled(2)), dc::ScheduleResult::rearmed);
  EXPECT_EQ(dc_test::counters().added, 2u);
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_EQ(cleaned(), 7u);
  EXPECT_FALSE(q_.scheduled_snapshot());
  EXPECT_EQ(q_.rearm.claimed_at(), 0) << "the claim's call ran: no clock";
  EXPECT_EQ(pool_.cleaned_twice_or_more(), 0u);
}

// A bound of zero: the first look starts the clock and, seen outstanding for
// zero time, the claim is stale at that same look.
TEST_F(Rearm, ZeroBoundIsStaleAtTheFirstLook) {
  q_.settings.stale_claim_ns.store(0);
  dc_test::lose_next(1);
  EXPECT_EQ(dc::on_user_object_destroyed(q_, plain(0)), dc::ScheduleResult::scheduled);
  EXPECT_EQ(dc::on_user_object_destroyed(q_, sampled(0)), dc::ScheduleResult::rearmed);
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_EQ(cleaned(), 2u);
  EXPECT_FALSE(q_.scheduled_snapshot());
}

TEST_F(Rearm, LostCallRecoveredByAMainThreadEntryPoint) {
  dc_test::lose_next(1);
  EXPECT_EQ(dc::on_user_object_destroyed(q_, plain(0)), dc::ScheduleResult::scheduled);
  // Before the bound the entry point drains directly but does not re-arm.
  EXPECT_EQ(dc::drain_at_entry(q_), dc::EntryAction::drained);
  EXPECT_EQ(cleaned(), 1u);
  EXPECT_EQ(dc_test::counters().added, 1u);
  EXPECT_TRUE(q_.scheduled_snapshot());  // still claimed by the lost call
  EXPECT_EQ(dc::on_user_object_destroyed(q_, plain(1)), dc::ScheduleResult::already_scheduled);
  dc_test::advance_clock(kBound);
  // After the bound: it drains and re-arms the pending-call path.
  EXPECT_EQ(dc::drain_at_entry(q_), dc::EntryAction::drained);
  EXPECT_EQ(cleaned(), 2u);
  EXPECT_EQ(q_.stats.rearms.load(), 1u);
  EXPECT_EQ(dc_test::counters().added, 2u);
  EXPECT_EQ(dc_test::run_all(), 1u);  // the re-armed call clears scheduled_
  EXPECT_FALSE(q_.scheduled_snapshot());
  EXPECT_EQ(dc::on_user_object_destroyed(q_, plain(2)), dc::ScheduleResult::scheduled);
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_EQ(cleaned(), 3u);
  EXPECT_EQ(pool_.cleaned_twice_or_more(), 0u);
  EXPECT_LE(dc_test::counters().max_ours_outstanding, 2u);
}

TEST_F(Rearm, SlowCallIsReArmedOnceNeverMoreThanTwoOutstanding) {
  // The first call is not lost, only slow (the main thread is busy).
  EXPECT_EQ(dc::on_user_object_destroyed(q_, plain(0)), dc::ScheduleResult::scheduled);
  first_look();
  dc_test::advance_clock(kBound);
  dc::ScheduleResult r{};
  std::thread off_main([&] { r = dc::retry_schedule(q_); });  // an entry point off the main thread
  off_main.join();
  EXPECT_EQ(r, dc::ScheduleResult::rearmed);
  EXPECT_EQ(dc_test::counters().ours_outstanding, 2u);
  // However long it stays slow, and whoever looks, no third call.
  for (int k = 0; k < 5; ++k) {
    dc_test::advance_clock(10 * kBound);
    EXPECT_EQ(dc::on_user_object_destroyed(q_, sampled(k)), dc::ScheduleResult::already_scheduled);
    std::thread again([&] { r = dc::retry_schedule(q_); });
    again.join();
    EXPECT_EQ(r, dc::ScheduleResult::already_scheduled);
  }
  EXPECT_EQ(dc_test::counters().added, 2u);
  EXPECT_EQ(dc_test::counters().max_ours_outstanding, 2u);
  EXPECT_EQ(dc_test::run_all(), 2u);
  EXPECT_EQ(cleaned(), 6u);
  EXPECT_EQ(pool_.cleaned_twice_or_more(), 0u);
  EXPECT_FALSE(q_.scheduled_snapshot());
  EXPECT_EQ(dc::calls_outstanding(q_), 0u);
}

TEST_F(Rearm, RefusedReArmIsRetriedOneBoundLater) {
  EXPECT_EQ(dc::on_user_object_destroyed(q_, plain(0)), dc::ScheduleResult::scheduled);
  first_look();
  dc_test::advance_clock(kBound);
  // Fill the ring: the re-arm is refused.
  while (dc_test::add_foreign()) {
  }
  EXPECT_EQ(dc::on_user_object_destroyed(q_, sampled(0)), dc::ScheduleResult::refused);
  EXPECT_EQ(dc::calls_outstanding(q_), 1u);  // the refusal undid the count
  // Until one bound later nobody re-arms again.
  EXPECT_EQ(dc_test::counters().ours_outstanding, 1u);
  EXPECT_EQ(dc::on_user_object_destroyed(q_, sampled(1)), dc::ScheduleResult::already_scheduled);
  EXPECT_EQ(dc_test::run_all(), 32u);
  EXPECT_EQ(cleaned(), 3u);
  EXPECT_EQ(pool_.cleaned_twice_or_more(), 0u);
}

// Each call carries a sequence number and CPython's ring is FIFO, so when the
// claim's call runs every older call has run or was lost: a lost call is not
// counted for ever, and a second lost call, much later, is re-armed too.
TEST_F(Rearm, SecondLostCallIsRecoveredByALaterEnqueue) {
  dc_test::lose_next(1);
  EXPECT_EQ(dc::on_user_object_destroyed(q_, plain(0)), dc::ScheduleResult::scheduled);
  first_look();
  dc_test::advance_clock(kBound);
  EXPECT_EQ(dc::on_user_object_destroyed(q_, sampled(0)), dc::ScheduleResult::rearmed);
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_EQ(cleaned(), 2u);
  EXPECT_EQ(dc::calls_outstanding(q_), 0u) << "the lost call is still counted as outstanding";
  EXPECT_EQ(q_.rearm.superseded(), 0u);
  dc_test::lose_next(1);  // a second lost call, much later
  dc_test::advance_clock(100 * kBound);
  EXPECT_EQ(dc::on_user_object_destroyed(q_, plain(1)), dc::ScheduleResult::scheduled);
  first_look();
  dc_test::advance_clock(kBound);
  EXPECT_EQ(dc::on_user_object_destroyed(q_, sampled(1)), dc::ScheduleResult::rearmed);
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_EQ(cleaned(), 4u);
}

TEST_F(Rearm, SupersededCallDrainsButDoesNotClearTheClaim) {
  // The claim's call is slow (still in the ring), a re-arm supersedes it.
  EXPECT_EQ(dc::on_user_object_destroyed(q_, plain(0)), dc::ScheduleResult::scheduled);
  first_look();
  dc_test::advance_clock(kBound);
  EXPECT_EQ(dc::on_user_object_destroyed(q_, sampled(0)), dc::ScheduleResult::rearmed);
  EXPECT_EQ(q_.rearm.superseded(), 1u);
  // The old call runs first (FIFO): it drains, but the claim is the new
  // call's, so scheduled_ stays set and no producer adds a third call.
  EXPECT_TRUE(dc_test::run_one());
  EXPECT_EQ(cleaned(), 2u);
  EXPECT_TRUE(q_.scheduled_snapshot())
      << "a superseded call cleared the claim of the call after it";
  EXPECT_EQ(q_.rearm.superseded(), 0u);
  EXPECT_EQ(dc::on_user_object_destroyed(q_, plain(1)), dc::ScheduleResult::already_scheduled);
  EXPECT_EQ(dc_test::counters().added, 2u);
  // The claim's call clears and drains what came meanwhile.
  EXPECT_TRUE(dc_test::run_one());
  EXPECT_FALSE(q_.scheduled_snapshot());
  EXPECT_EQ(cleaned(), 3u);
  EXPECT_LE(dc_test::counters().max_ours_outstanding, 2u);
  EXPECT_EQ(pool_.cleaned_twice_or_more(), 0u);
}

// The Promela model's trail (tests/model, check rearm_refusal): the claim's
// call runs as a superseded call while the re-arm that superseded it is
// refused.  The re-arm must not hand the claim back to a call that already
// ran; it gives the claim back and retries, so nothing is stranded.
void run_old_call_then_fill_ring(const void*) {
  dc_test::set_in_gate_hook(nullptr);  // once
  EXPECT_TRUE(dc_test::run_one());     // the old call runs now (superseded: drains, no clear)
  while (dc_test::add_foreign()) {
  }  // and the re-arm's call will be refused
}

TEST_F(Rearm, RefusedReArmAfterTheOldCallRanGivesTheClaimBack) {
  EXPECT_EQ(dc::on_user_object_destroyed(q_, plain(0)), dc::ScheduleResult::scheduled);
  first_look();
  dc_test::advance_clock(kBound);
  dc_test::set_in_gate_hook(&run_old_call_then_fill_ring);
  const dc::ScheduleResult r = dc::on_user_object_destroyed(q_, sampled(0));
  dc_test::set_in_gate_hook(nullptr);
  EXPECT_EQ(r, dc::ScheduleResult::refused);  // the retry is refused too: the ring is full
  EXPECT_EQ(cleaned(), 2u);                   // the old call drained both items
  EXPECT_FALSE(q_.scheduled_snapshot()) << "claim held for a call that already ran: stranded";
  // The ring empties; the next enqueue claims and its call drains everything.
  EXPECT_EQ(dc_test::run_all(), 32u);
  EXPECT_EQ(dc::on_user_object_destroyed(q_, plain(1)), dc::ScheduleResult::scheduled);
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_EQ(cleaned(), 3u);
  EXPECT_EQ(pool_.cleaned_twice_or_more(), 0u);
}

// ------------------------------- past the bound: the main thread's re-arm (reference only)
//
// scheduling.hpp, re-arming, rule 2: when the claim's call and the call that
// superseded it are both lost, no newer call runs, the superseded record is
// never cleared and no producer may add a call.  A main-thread entry point
// outside a drain then adds one call past the bound, with its own record; it
// is not lost (it goes to the main interpreter's ring), and when it runs it
// clears the claim and both records.  The fake loses only calls added off
// the main thread (lose_next_foreign), as CPython does.

// Run `f` on a thread that is not the main thread (a driver thread, or an
// entry point called off the main thread) and return its result.
template <class F>
dc::ScheduleResult off_main(F f) {
  dc::ScheduleResult r{};
  std::thread t([&] { r = f(); });
  t.join();
  return r;
}

class RearmPastTheBound : public Rearm {
 protected:
  dc::ScheduleResult enqueue_off_main(dc::DeferredCleanupItem* it) {
    return off_main([&] { return dc::on_user_object_destroyed(q_, it); });
  }
  dc::ScheduleResult entry_off_main() {
    return off_main([&] { return dc::retry_schedule(q_); });
  }
  // The claim's call and the re-arm's call, both added off the main thread
  // and both lost; then producers and entry points off the main thread keep
  // looking at the stale claim and add nothing: the bound.
  void lose_a_call_and_its_rearm(std::size_t first_item) {
    const auto before = dc_test::counters();
    EXPECT_EQ(enqueue_off_main(plain(first_item)), dc::ScheduleResult::scheduled);
    first_look();
    dc_test::advance_clock(kBound);
    EXPECT_EQ(entry_off_main(), dc::ScheduleResult::rearmed);
    EXPECT_EQ(dc_test::counters().lost, before.lost + 2);
    EXPECT_EQ(dc_test::run_all(), 0u);
    for (int k = 0; k < 3; ++k) {
      dc_test::advance_clock(10 * kBound);
      EXPECT_EQ(entry_off_main(), dc::ScheduleResult::already_scheduled);
      EXPECT_EQ(enqueue_off_main(sampled(sampled_next_++)), dc::ScheduleResult::already_scheduled);
    }
    EXPECT_EQ(dc_test::counters().added, before.added + 2)
        << "a call past the bound off the main thread";
    EXPECT_EQ(dc_test::run_all(), 0u);
    EXPECT_TRUE(q_.scheduled_snapshot());
  }
  // After recovery: a new item from a driver thread is cleaned by a pending
  // call (a drain cycle), not by an entry point's direct drain.
  void next_enqueue_is_cleaned_by_a_pending_call(std::size_t item) {
    const std::size_t was = cleaned();
    const auto direct = q_.stats.direct_drains.load();
    const auto cycles = q_.stats.drain_cycles.load();
    EXPECT_EQ(enqueue_off_main(plain(item)), dc::ScheduleResult::scheduled);
    EXPECT_EQ(dc_test::run_all(), 1u);
    EXPECT_EQ(cleaned(), was + 1);
    EXPECT_EQ(q_.stats.drain_cycles.load(), cycles + 1);
    EXPECT_EQ(q_.stats.direct_drains.load(), direct);
    EXPECT_FALSE(q_.scheduled_snapshot());
    EXPECT_EQ(dc::calls_outstanding(q_), 0u);
  }
  std::size_t sampled_next_ = 0;
};

TEST_F(RearmPastTheBound, TwoLostCallsThenAMainThreadEntryPoint) {
  dc_test::lose_next_foreign(2);
  lose_a_call_and_its_rearm(0);
  EXPECT_EQ(cleaned(), 0u);
  // The claim is stale: a main-thread entry point drains directly and adds
  // one call past the bound, which becomes the claim's call.
  EXPECT_EQ(dc::drain_at_entry(q_), dc::EntryAction::drained);
  EXPECT_EQ(cleaned(), 4u);
  EXPECT_EQ(q_.stats.main_rearms.load(), 1u);
  EXPECT_EQ(q_.stats.rearms.load(), 2u);
  EXPECT_EQ(dc_test::counters().added, 3u);
  // The bound, reached: the documented constant (rearm_state.hpp).
  EXPECT_EQ(dc::calls_outstanding(q_), dc::kMaxCallsOutstanding);
  // However long it waits and whoever looks, no fourth call.
  for (int k = 0; k < 3; ++k) {
    dc_test::advance_clock(10 * kBound);
    EXPECT_EQ(dc::drain_at_entry(q_), dc::EntryAction::nothing);
    EXPECT_EQ(entry_off_main(), dc::ScheduleResult::empty);
  }
  EXPECT_EQ(dc_test::counters().added, 3u);
  // The main thread's call runs at the next eval-breaker check: it clears the claim.
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_FALSE(q_.scheduled_snapshot()) << "the main thread's call did not clear the claim";
  EXPECT_EQ(dc::calls_outstanding(q_), 0u);
  EXPECT_EQ(q_.rearm.superseded(), 0u);
  EXPECT_EQ(q_.rearm.main_rearmed(), 0u);
  next_enqueue_is_cleaned_by_a_pending_call(1);
  EXPECT_EQ(dc_test::counters().max_ours_unresolved, 3u);  // the bound, reached
  EXPECT_LE(dc_test::counters().max_ours_outstanding, 3u);
  EXPECT_EQ(pool_.cleaned_twice_or_more(), 0u);
}

// fork() (BasicQueue::reset_after_fork, RearmState::reset_after_fork) with
// every call record set: the parent lost its claim's call and the re-arm's,
// and a main-thread entry point added one call past the bound, outstanding
// at fork.  None of those calls exists in the child (the fake host is reset),
// so no record of them may survive there: a child that loses its own first
// two calls recovers exactly as the parent did.
TEST_F(RearmPastTheBound, AForkChildInheritsNoCallRecordAndRecoversItsOwnLostCalls) {
  dc_test::lose_next_foreign(2);
  lose_a_call_and_its_rearm(0);
  EXPECT_EQ(dc::drain_at_entry(q_), dc::EntryAction::drained);
  ASSERT_EQ(q_.rearm.superseded(), 1u);    // witness: the parent's records are set
  ASSERT_EQ(q_.rearm.main_rearmed(), 1u);  // at fork
  dc_test::reset_host(32, 0, 1);           // the child: none of the parent's calls
  q_.reset_after_fork(false);
  EXPECT_EQ(q_.rearm.superseded(), 0u);
  EXPECT_EQ(q_.rearm.main_rearmed(), 0u);
  dc_test::lose_next_foreign(2);
  lose_a_call_and_its_rearm(1);  // the child's re-arm is allowed: no superseded record
  EXPECT_EQ(dc::drain_at_entry(q_), dc::EntryAction::drained);
  EXPECT_EQ(q_.stats.main_rearms.load(), 2u);  // the parent's and the child's own
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_FALSE(q_.scheduled_snapshot());
  next_enqueue_is_cleaned_by_a_pending_call(2);
  EXPECT_EQ(pool_.cleaned_twice_or_more(), 0u);
}

// Three consecutive lost calls from foreign threads: the claim's call and
// the re-arm's call, recovered by the main thread past the bound as above;
// then the next claim's call is lost too, and the next main-thread entry
// point once that claim is stale re-arms it (within the bound again: the
// records were cleared).  Every main-thread entry point recovers, however
// many foreign calls in a row are lost.
TEST_F(RearmPastTheBound, ThreeLostCallsThenMainThreadEntryPoints) {
  dc_test::lose_next_foreign(3);
  lose_a_call_and_its_rearm(0);
  dc_test::advance_clock(kBound);
  EXPECT_EQ(dc::drain_at_entry(q_), dc::EntryAction::drained);
  EXPECT_EQ(cleaned(), 4u);
  EXPECT_EQ(q_.stats.main_rearms.load(), 1u);
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_FALSE(q_.scheduled_snapshot());
  // The third lost call: the next claim's.
  EXPECT_EQ(enqueue_off_main(plain(1)), dc::ScheduleResult::scheduled);
  EXPECT_EQ(dc_test::counters().lost, 3u);
  EXPECT_EQ(dc_test::run_all(), 0u);
  EXPECT_EQ(enqueue_off_main(plain(2)), dc::ScheduleResult::already_scheduled);
  first_look();  // a look (plain items do not look) starts the third claim's clock
  dc_test::advance_clock(kBound);
  EXPECT_EQ(dc::drain_at_entry(q_), dc::EntryAction::drained);
  EXPECT_EQ(cleaned(), 6u);
  EXPECT_EQ(q_.stats.rearms.load(), 3u);
  EXPECT_EQ(q_.stats.main_rearms.load(), 1u);  // within the bound this time
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_FALSE(q_.scheduled_snapshot());
  next_enqueue_is_cleaned_by_a_pending_call(3);
  EXPECT_EQ(dc_test::counters().lost, 3u);
  EXPECT_EQ(dc_test::counters().added, 6u);
  EXPECT_LE(dc_test::counters().max_ours_unresolved, 3u);
  EXPECT_LE(dc_test::counters().max_ours_outstanding, 3u);
  EXPECT_EQ(pool_.cleaned_twice_or_more(), 0u);
}

// The bound of three, reached with slow calls (none lost, the main thread
// busy): the claim's call, the re-arm's call and the main thread's call in
// the ring at once; after the oldest runs, one more re-arm from a producer
// (a superseded slot is free again) keeps three in the ring; nobody adds a
// fourth, and when the main thread's call runs the records clear.
TEST_F(RearmPastTheBound, SlowCallsNeverMoreThanThreeOutstanding) {
  EXPECT_EQ(enqueue_off_main(plain(0)), dc::ScheduleResult::scheduled);
  first_look();
  dc_test::advance_clock(kBound);
  EXPECT_EQ(entry_off_main(), dc::ScheduleResult::rearmed);
  dc_test::advance_clock(kBound);
  EXPECT_EQ(dc::drain_at_entry(q_), dc::EntryAction::drained);
  EXPECT_EQ(q_.stats.main_rearms.load(), 1u);
  EXPECT_EQ(dc_test::counters().ours_outstanding, 3u);
  EXPECT_TRUE(dc_test::run_one());  // the oldest call: drains, frees the superseded slot
  EXPECT_EQ(q_.rearm.superseded(), 0u);
  EXPECT_TRUE(q_.scheduled_snapshot());
  dc_test::advance_clock(kBound);
  EXPECT_EQ(enqueue_off_main(plain(1)), dc::ScheduleResult::already_scheduled);
  EXPECT_EQ(entry_off_main(), dc::ScheduleResult::rearmed);  // within the bound again
  EXPECT_EQ(dc_test::counters().ours_outstanding, 3u);
  for (int k = 0; k < 3; ++k) {
    dc_test::advance_clock(10 * kBound);
    EXPECT_EQ(enqueue_off_main(sampled(k)), dc::ScheduleResult::already_scheduled);
    EXPECT_EQ(entry_off_main(), dc::ScheduleResult::already_scheduled);
    EXPECT_EQ(dc::drain_at_entry(q_), dc::EntryAction::drained);
  }
  EXPECT_EQ(dc_test::counters().added, 4u);
  EXPECT_EQ(dc_test::counters().max_ours_outstanding, 3u);
  EXPECT_EQ(dc_test::counters().max_ours_unresolved, 3u);
  EXPECT_LE(dc::calls_outstanding(q_), dc::kMaxCallsOutstanding);
  EXPECT_EQ(dc_test::run_all(), 3u);
  EXPECT_FALSE(q_.scheduled_snapshot());
  EXPECT_EQ(dc::calls_outstanding(q_), 0u);
  next_enqueue_is_cleaned_by_a_pending_call(2);
  EXPECT_EQ(pool_.cleaned_twice_or_more(), 0u);
}

// A cleanup that calls an entry point runs inside a drain: that nested entry
// point must not go past the bound (the rule is for the main thread outside
// a drain); the next entry point outside the drain does.
dc::ReferenceQueue* g_nested_queue = nullptr;
std::uint64_t g_nested_main_rearms = ~0ull;
std::uint64_t g_nested_added = ~0ull;
void cleanup_that_calls_an_entry_point(void* payload) noexcept {
  ++*static_cast<unsigned char*>(payload);
  dc::drain_at_entry(*g_nested_queue);
  g_nested_main_rearms = g_nested_queue->stats.main_rearms.load();
  g_nested_added = dc_test::counters().added;
}

TEST_F(RearmPastTheBound, NotFromAnEntryPointInsideADrain) {
  dc_test::lose_next_foreign(2);
  lose_a_call_and_its_rearm(0);
  unsigned char hit = 0;
  dc::DeferredCleanupItem nested;
  dc::init_item(nested, &hit, &cleanup_that_calls_an_entry_point);
  g_nested_queue = &q_;
  EXPECT_EQ(enqueue_off_main(&nested), dc::ScheduleResult::already_scheduled);
  EXPECT_EQ(dc::drain_all(q_), 5u);  // as a drain on the main thread does
  EXPECT_EQ(hit, 1);
  EXPECT_EQ(g_nested_main_rearms, 0u) << "an entry point inside a drain re-armed past the bound";
  EXPECT_EQ(g_nested_added, 2u);
  EXPECT_EQ(dc::drain_at_entry(q_), dc::EntryAction::nothing);
  EXPECT_EQ(q_.stats.main_rearms.load(), 1u);
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_FALSE(q_.scheduled_snapshot());
  g_nested_queue = nullptr;
}

// The direct drain at a main-thread entry point leaves the claim alone: only
// the claim's own pending call clears scheduled_.  A push after the direct
// drain finds the claim and adds no second call; the outstanding call then
// runs, clears it and cleans that item.
TEST(Reference, EntryPointDrainKeepsTheClaim) {
  dc_test::reset_host(32, 0, 1);
  dc_test::set_main_thread();
  dc::ReferenceQueue q(dc_test::host());
  Items it(2);
  EXPECT_EQ(dc::on_user_object_destroyed(q, &it.items[0]), dc::ScheduleResult::scheduled);
  EXPECT_EQ(dc::drain_at_entry(q), dc::EntryAction::drained);
  EXPECT_EQ(it.hits[0], 1);
  EXPECT_TRUE(q.scheduled_snapshot()) << "the direct drain must not clear the claim";
  EXPECT_NE(dc::on_user_object_destroyed(q, &it.items[1]), dc::ScheduleResult::scheduled);
  EXPECT_EQ(dc_test::counters().added, 1u);  // one pending call of the queue
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_EQ(it.hits[1], 1);
  EXPECT_FALSE(q.scheduled_snapshot());
  EXPECT_EQ(dc_test::counters().max_ours_outstanding, 1u);
}

// ------------------------------------------------- shutdown (reference only)

TEST(Shutdown, AfterCloseCallbacksOnlyEnqueueAndAreLeaked) {
  dc_test::reset_host(32, 0, 1);
  dc_test::set_main_thread();
  dc::ReferenceQueue q(dc_test::host());
  Items it(3);
  dc::on_user_object_destroyed(q, &it.items[0]);
  const dc::ShutdownOutcome out = dc::shutdown_at_exit(q, std::chrono::seconds(5));
  EXPECT_TRUE(out.gate_clear);
  EXPECT_EQ(out.final_drained, 1u);  // the final drain, interpreter alive
  EXPECT_EQ(it.hits[0], 1);
  EXPECT_TRUE(q.host_alive()) << "steps 1-3 only: the host marks itself dead when finalizing";
  q.mark_host_dead();  // step 4, the host's: CPython set its finalizing flag
  dc_test::close_host();
  // Late callbacks push and never call the host: the pending call made
  // before shutdown still holds scheduled_, so the fast path returns
  // already_scheduled; a producer that finds no claim stops at the gate.
  for (int i = 1; i <= 2; ++i) {
    const dc::ScheduleResult r = dc::on_user_object_destroyed(q, &it.items[i]);
    EXPECT_TRUE(r == dc::ScheduleResult::already_scheduled ||
                r == dc::ScheduleResult::not_accepting);
  }
  EXPECT_EQ(dc_test::counters().added, 1u);
  EXPECT_EQ(dc::drain_at_entry(q), dc::EntryAction::nothing);
  EXPECT_EQ(dc_test::run_all(), 1u);  // the pending call made before shutdown: a no-op now
  EXPECT_EQ(q.stats.pending_calls_ignored.load(), 1u);
  EXPECT_EQ(dc::backstop_at_exit(q), 2u);
  EXPECT_EQ(it.hits[0], 1);
  EXPECT_EQ(it.hits[1], 0);
  EXPECT_EQ(it.hits[2], 0);
  EXPECT_EQ(dc_test::counters().after_close, 0u);
}

// Between the exit sequence (steps 1-3) and CPython's finalizing flag (step 4)
// only the main thread drains: a late destructor pushes without calling the
// host, an entry point on the main thread still cleans it; once the host is
// dead nothing does, and the backstop counts it.  (The CPython host uses this
// window for graphs destroyed by atexit handlers that run after its hook.)
TEST(Shutdown, AfterCloseOnlyTheMainThreadDrainsUntilHostDead) {
  dc_test::reset_host(32, 0, 1);
  dc_test::set_main_thread();
  dc::ReferenceQueue q(dc_test::host());
  Items it(3);
  dc::on_user_object_destroyed(q, &it.items[0]);
  EXPECT_EQ(dc_test::run_all(), 1u);  // the ordinary path before exit: the claim is free again
  const dc::ShutdownOutcome out = dc::shutdown_at_exit(q, std::chrono::seconds(5));
  EXPECT_TRUE(out.gate_clear);
  EXPECT_EQ(out.final_drained, 0u);
  const std::uint64_t added = dc_test::counters().added;
  EXPECT_EQ(dc::on_user_object_destroyed(q, &it.items[1]), dc::ScheduleResult::not_accepting);
  EXPECT_EQ(dc_test::counters().added, added) << "no host call after close";
  EXPECT_EQ(it.hits[1], 0);
  EXPECT_EQ(dc::drain_all(q), 1u);  // the main thread, before finalization
  EXPECT_EQ(it.hits[1], 1);
  q.mark_host_dead();
  dc_test::close_host();
  dc::on_user_object_destroyed(q, &it.items[2]);
  EXPECT_EQ(dc::drain_all(q), 0u);
  EXPECT_EQ(dc::drain_at_entry(q), dc::EntryAction::nothing);
  EXPECT_EQ(dc::backstop_at_exit(q), 1u);
  EXPECT_EQ(it.hits[0], 1);
  EXPECT_EQ(it.hits[2], 0);
  EXPECT_EQ(dc_test::counters().after_close, 0u);
}

// A producer held between the gate check and add_pending_call: the reference
// shutdown must wait for it, so its call lands while the host is alive.
std::atomic<int> g_gate_state{0};  // 0 idle, 1 producer inside the hook, 2 released

void hold_in_gate(const void*) {
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
  dc::ReferenceQueue q(dc_test::host());
  Items it(1);
  std::thread producer([&] { dc::on_user_object_destroyed(q, &it.items[0]); });
  while (g_gate_state.load() != 1) std::this_thread::yield();
  EXPECT_EQ(q.in_flight(), 1u);
  std::thread releaser([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    g_gate_state.store(2);
  });
  const dc::ShutdownOutcome out = dc::shutdown_at_exit(q, std::chrono::seconds(10));
  dc_test::close_host();  // teardown: any call from now on is a violation
  producer.join();
  releaser.join();
  EXPECT_TRUE(out.gate_clear);
  EXPECT_GE(out.waited_us, 10000u);  // it did wait (the releaser sleeps 50 ms)
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
  dc::ReferenceQueue q(dc_test::host());
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
  q.mark_host_dead();        // step 4, the host's: CPython set its finalizing flag
  EXPECT_EQ(dc_test::run_all(), 1u);  // the late pending call runs as a no-op: host dead
  EXPECT_EQ(q.stats.pending_calls_ignored.load(), 1u);
  EXPECT_EQ(it.hits[0], 1);
  EXPECT_EQ(dc::backstop_at_exit(q), 0u);
}

// fork() (BasicQueue::reset_after_fork): the child has one thread and none
// of the parent's pending calls can be counted on.  Played here without a
// fork: the parent holds the claim with its call outstanding, a producer
// sits inside the gate and an item is queued; the fake host is then reset
// (the parent's call lost, as in a child) and the queue reset as the
// at-fork handler does.  The child's schedule() must add a new call that
// cleans the item, its exit must not wait for the parent's producer, and
// stats count the reset.
TEST(Fork, AChildKeepsTheQueuedItemsButNoClaimAndNoProducerOfTheParent) {
  dc_test::reset_host(32, 0, 1);
  dc_test::set_main_thread();
  dc::ReferenceQueue q(dc_test::host());
  Items it(1);
  ASSERT_EQ(dc::on_user_object_destroyed(q, &it.items[0]), dc::ScheduleResult::scheduled);
  ASSERT_TRUE(q.gate_enter());    // a parent's producer inside the gate, never to leave
  dc_test::reset_host(32, 0, 1);  // the child: the parent's call is not there
  q.reset_after_fork(false);
  EXPECT_EQ(q.stats.forks.load(), 1u);
  EXPECT_EQ(q.in_flight(), 0u);
  EXPECT_EQ(dc::schedule(q), dc::ScheduleResult::scheduled);  // no claim inherited
  EXPECT_EQ(dc_test::run_all(), 1u);
  EXPECT_EQ(it.cleaned_once(), 1u);
  // The child's exit does not wait for the parent's producer (the wait would
  // end at its 1 s bound with the gate not clear).
  const dc::ShutdownOutcome out = dc::shutdown_at_exit(q, std::chrono::seconds(1));
  dc_test::close_host();
  EXPECT_TRUE(out.gate_clear);
}

// drain_now() off the main thread refuses and runs nothing: the item stays
// queued, and the main thread's drain cleans it once.
TEST(DrainNow, OffTheMainThreadRefusesAndLosesNothing) {
  dc_test::reset_host(32, 0, 1);
  dc_test::set_main_thread();
  dc::ReferenceQueue q(dc_test::host());
  Items it(1);
  q.push(&it.items[0]);
  dc::DrainNowResult off{};
  std::thread other([&] { off = dc::drain_now(q); });
  other.join();
  EXPECT_EQ(off.status, dc::DrainNowStatus::not_main_thread);
  EXPECT_EQ(off.cleaned, 0u);
  EXPECT_EQ(it.hits[0], 0);
  EXPECT_FALSE(q.empty_snapshot());
  const dc::DrainNowResult on = dc::drain_now(q);
  EXPECT_EQ(on.status, dc::DrainNowStatus::drained);
  EXPECT_EQ(on.cleaned, 1u);
  EXPECT_EQ(it.cleaned_once(), 1u);
}

// A nested drain (a cleanup that reaches an entry point or runs another
// pending call) returns at once in the reference; the outer loop takes what
// it would have.
TEST(Reference, NestedDrainReturnsAndTheOuterLoopTakesTheItems) {
  dc_test::reset_host(32, 0, 1);
  dc_test::set_main_thread();
  dc::ReferenceQueue q(dc_test::host());
  Items it(1);
  struct Ctx {
    dc::ReferenceQueue* q;
    dc::DeferredCleanupItem* second;
    dc::EntryAction nested{};
  } ctx{&q, &it.items[0]};
  dc::DeferredCleanupItem first;
  dc::init_item(first, &ctx, [](void* p) noexcept {
    auto* c = static_cast<Ctx*>(p);
    c->q->push(c->second);
    c->nested = dc::drain_at_entry(*c->q);
  });
  q.push(&first);
  EXPECT_EQ(dc::drain_all(q), 2u);
  EXPECT_EQ(ctx.nested, dc::EntryAction::nothing);
  EXPECT_EQ(it.hits[0], 1);
}

}  // namespace
