// SPDX-License-Identifier: Apache-2.0
// sanitizer_canary.cpp: deliberate bugs that prove the sanitizer builds
// catch what they are meant to catch.  Built twice (CMakeLists.txt):
//   CANARY_RACE  two threads increment a plain int: ThreadSanitizer must
//                report a data race (.ci/tsan.sh expects a failing exit);
//   CANARY_UAF   a read through a freed pointer: AddressSanitizer must report
//                heap-use-after-free (.ci/asan.sh expects a failing exit).
// Never part of the test suite; without the sanitizer both exit 0.
#include <cstdio>
#include <thread>

#if defined(CANARY_RACE)
int g_counter = 0;  // deliberately not atomic

int main() {
  std::thread a([] {
    for (int i = 0; i < 100000; ++i) ++g_counter;
  });
  std::thread b([] {
    for (int i = 0; i < 100000; ++i) ++g_counter;
  });
  a.join();
  b.join();
  std::printf("counter=%d\n", g_counter);
  return 0;
}
#elif defined(CANARY_UAF)
int main() {
  int* volatile p = new int(42);
  delete p;
  std::printf("value=%d\n", *p);  // use after free
  return 0;
}
#else
#error "define CANARY_RACE or CANARY_UAF"
#endif
