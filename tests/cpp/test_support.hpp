// SPDX-License-Identifier: Apache-2.0
// test_support.hpp: payloads and policy lists shared by the GoogleTest files.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "deferred_cleanup/item.hpp"
#include "deferred_cleanup/comparison/policies.hpp"
#include "deferred_cleanup/policy.hpp"
#include "deferred_cleanup/queue.hpp"

namespace dc_test {

namespace dc = deferred_cleanup;

/// The three variants, for TYPED_TEST_SUITE.
using AllPolicies = ::testing::Types<dc::ReferencePolicy, dc::comparison::SeedPolicy,
                                     dc::comparison::CudaCore12Policy>;
/// The two comparison variants (PR #2371 text, cuda-core 1.2.0 wheel).
using ComparisonPolicies =
    ::testing::Types<dc::comparison::SeedPolicy, dc::comparison::CudaCore12Policy>;

/// Test names of typed tests: the variant's name, e.g. "cuda_core_1_2".
struct PolicyName {
  template <class P>
  static std::string GetName(int) {
    std::string s = P::name;
    for (char& c : s) {
      if (c == '-' || c == '.') c = '_';
    }
    return s;
  }
};

/// Cleanup that counts its calls in the byte the payload points to.  Only the
/// main thread runs cleanups, so a plain byte is right (TSan would report a
/// cleanup off the main thread racing with the test's reads).
inline void count_cleanup(void* payload) noexcept { ++*static_cast<unsigned char*>(payload); }

/// n items whose cleanups count into hits[i].
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

/// An environment knob (unsigned integer), or its default.
inline std::uint64_t env_u64(const char* name, std::uint64_t dflt) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::strtoull(v, nullptr, 10) : dflt;
}

}  // namespace dc_test
