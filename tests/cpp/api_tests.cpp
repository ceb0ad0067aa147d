// SPDX-License-Identifier: Apache-2.0
// api_tests.cpp: the generic API an extension uses: deferred_cleanup::Queue
// with no template argument, typed items (make_item, Item<T>), hand_off from
// another thread, cleanup_now, and the umbrella header.  The fake host
// (fake_host.hpp) runs the pending calls on this test's main thread.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "deferred_cleanup/deferred_cleanup.hpp"
#include "fake_host.hpp"

namespace {

namespace dc = deferred_cleanup;

std::thread::id g_main;
int g_on_main = 0;               // payload destructors on the main thread
std::atomic<int> g_off_main{0};  // payload destructors anywhere else

struct Payload {
  explicit Payload(int v) : value(v) {}
  ~Payload() { std::this_thread::get_id() == g_main ? ++g_on_main : ++g_off_main; }
  int value;
};

class Api : public ::testing::Test {
 protected:
  void SetUp() override {
    dc_test::reset_host(64, 0, 1);
    dc_test::set_main_thread();
    g_main = std::this_thread::get_id();
    g_on_main = 0;
    g_off_main = 0;
  }
};

static_assert(std::is_same_v<dc::Queue, dc::BasicQueue<dc::ReferencePolicy>>,
              "Queue is the reference, no template argument");

TEST_F(Api, TypedItemsHandedOffFromAThreadAreDestroyedOnceOnTheMainThread) {
  dc::Queue q(dc_test::host());
  constexpr int kN = 1000;
  std::vector<std::unique_ptr<dc::Item<Payload>>> items;
  for (int i = 0; i < kN; ++i) items.push_back(dc::make_item<Payload>(i));
  EXPECT_EQ(items[7]->value().value, 7);
  std::thread worker([&] {
    for (auto& it : items) dc::hand_off(q, std::move(it));
  });
  worker.join();
  for (const auto& it : items) EXPECT_EQ(it, nullptr);  // ownership moved into the queue
  EXPECT_EQ(g_on_main + g_off_main.load(), 0);          // nothing destroyed before a drain
  dc_test::run_all();                                   // the pending call: the drain
  EXPECT_EQ(g_on_main, kN);
  EXPECT_EQ(g_off_main.load(), 0);
  EXPECT_EQ(q.stats.cleaned.load(), static_cast<std::uint64_t>(kN));
}

TEST_F(Api, CleanupNowDestroysANeverHandedOffItemHereAndCountsIt) {
  dc::Queue q(dc_test::host());
  dc::cleanup_now(q, dc::make_item<Payload>(1));
  EXPECT_EQ(g_on_main, 1);
  EXPECT_EQ(q.stats.direct_cleanups.load(), 1u);
  EXPECT_EQ(dc::hand_off(q, std::unique_ptr<dc::Item<Payload>>()), dc::ScheduleResult::empty);
}

TEST_F(Api, HandOffAfterCloseStillPushesAndAMainThreadDrainCleans) {
  dc::Queue q(dc_test::host());
  q.close();  // shutdown closed the gate: no pending call, the item is kept
  EXPECT_EQ(dc::hand_off(q, dc::make_item<Payload>(2)), dc::ScheduleResult::not_accepting);
  EXPECT_EQ(g_on_main, 0);
  EXPECT_EQ(dc::drain_now(q).cleaned, 1u);
  EXPECT_EQ(g_on_main, 1);
}

TEST(Version, TheNumberAndTheStringSayTheSame) {
  // tests/test_packaging.py checks the string against pyproject.toml.
  const std::string parts = std::to_string(DEFERRED_CLEANUP_VERSION_MAJOR) + "." +
                            std::to_string(DEFERRED_CLEANUP_VERSION_MINOR) + "." +
                            std::to_string(DEFERRED_CLEANUP_VERSION_PATCH);
  EXPECT_EQ(parts, DEFERRED_CLEANUP_VERSION_STRING);
  EXPECT_EQ(DEFERRED_CLEANUP_VERSION, DEFERRED_CLEANUP_VERSION_MAJOR * 10000 +
                                          DEFERRED_CLEANUP_VERSION_MINOR * 100 +
                                          DEFERRED_CLEANUP_VERSION_PATCH);
}

}  // namespace
