// SPDX-License-Identifier: Apache-2.0
//
// host_threads.cpp: see host_threads.hpp.
#include "host_threads.hpp"

#include <Python.h>

#include <chrono>
#include <thread>

namespace deferred_cleanup::cpython::detail {

bool wait_for_host_calls(const std::atomic<std::uint32_t>& in_host,
                         std::int64_t deadline_ns) noexcept {
  for (;;) {
    if (in_host.load(std::memory_order_seq_cst) == 0) return true;
    const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count();
    if (now >= deadline_ns) return false;  // bounded
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

ForkChild reset_threads_after_fork(unsigned long& main_ident, std::atomic<std::uint32_t>& in_host,
                                   bool& in_pending_call) noexcept {
  const unsigned long me = PyThread_get_thread_ident();
  ForkChild r{me == main_ident, false};
  main_ident = me;  // the forking thread is the child's main thread
  // A producer that was inside Py_AddPendingCall at the fork is not in the
  // child (the backstop would wait for it to its bound).  One thread here.
  in_host.store(0, std::memory_order_relaxed);
  if (in_pending_call && !r.same_thread) {
    // CPython may never run a pending call in this child; entry points still
    // drain directly.
    r.left_pending_call = true;
    in_pending_call = false;
  }
  return r;
}

}  // namespace deferred_cleanup::cpython::detail
