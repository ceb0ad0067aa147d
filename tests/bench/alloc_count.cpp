// SPDX-License-Identifier: Apache-2.0
// alloc_count.cpp: the global operator new, replaced to count allocations, so
// that the benchmarks can show the queue allocates nothing (an own translation
// unit: GCC's -Wmismatched-new-delete misreads the replacement when inlined).
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

std::atomic<std::uint64_t> g_allocations{0};

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
