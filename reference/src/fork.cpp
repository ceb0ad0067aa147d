// SPDX-License-Identifier: Apache-2.0
// fork.cpp: the CPython host in a fork() child.
//
// A fork() child is made consistent by after_fork_child(), registered by
// deferred_cleanup/__init__.py with os.register_at_fork in every variant (it
// is the host's and the simulated driver's state, not the protocol's): only
// the forking thread exists in the child (POSIX fork(2)), so producers held
// in the parent, the drivers' destructor threads and a pending call the main
// thread was running are gone (docs: Caveats, fork()).
#include <pybind11/pybind11.h>

#include <mutex>
#include <new>

#include "deferred_cleanup/scheduling.hpp"
#include "host.hpp"

namespace deferred_cleanup::host {

namespace {

void after_fork_child() {
  // The thread-bound state: the host library's reset (src/cpython/host_threads.hpp).
  const auto child = deferred_cleanup::cpython::detail::reset_threads_after_fork(
      g_main_ident, g_in_host, g_in_pending_call);
  const bool same = child.same_thread;
  if (child.left_pending_call) {
    // CPython may never run a pending call in this child (see
    // g_in_pending_call); entry points still drain directly (reference).
    g_counters.forks_in_pending_call.fetch_add(1, std::memory_order_relaxed);  // statistics only
  }
  with_queue([same](auto& q) { q.reset_after_fork(same); });
  std::vector<std::shared_ptr<SimulatedDriver>> all;
  {
    // The child has one thread: g_drivers_mu cannot be held by another, but
    // it may have been held at fork time; make a new one.
    new (&g_drivers_mu) std::mutex;
    new (&g_graphs_mu) std::mutex;  // the same for the graphs' lock (host.hpp)
    for (auto& w : g_sim_drivers)
      if (auto d = w.lock()) all.push_back(std::move(d));
  }
  for (auto& d : all) {
    // Destructor calls that were running on a thread the child does not have
    // never come here: they are no longer due (else the exit wait would wait
    // for them to its bound).
    const std::uint64_t lost = d->after_fork_child();
    g_counters.user_objects.fetch_sub(lost, std::memory_order_relaxed);  // statistics only
  }
#if DC_TEST_HOOKS
  test_hooks_after_fork();  // test build only
#endif
  // Items queued in the parent are the child's own copies: schedule their
  // drain in the child (see Caveats, fork()).
  with_queue([](auto& q) {
    if (!q.empty_snapshot()) retry_schedule(q);
  });
}

}  // namespace

void init_fork(py::module_& m) {
  m.def("_after_fork_child", &after_fork_child,
        "_after_fork_child() -> None\n\nos.register_at_fork(after_in_child=...) handler: reset the "
        "queue's "
        "thread-bound state and the simulated drivers' threads in the child.");
}

}  // namespace deferred_cleanup::host
