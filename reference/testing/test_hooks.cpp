// SPDX-License-Identifier: Apache-2.0
// test_hooks.cpp: the `_test_` functions of deferred_cleanup._native.
//
// They make rare interleavings happen on purpose, with the real code:
//
//   * hold one producer inside the window between its last check and
//     Py_AddPendingCall (the reference's gate window; the comparison
//     variants' check-to-call window), for a time or until released, also by
//     the Py_AtExit backstop (then the held producer calls CPython after
//     teardown: the hole of the comparison variants);
//   * lose the next N pending calls: a wrapper of the Host's
//     add_pending_call, installed by the first _test_lose_calls(n > 0),
//     reports them accepted and drops them, as CPython 3.10/3.11 lose a call
//     added while a subinterpreter holds the GIL (probe field
//     `subinterp.runner`); the production path to Py_AddPendingCall
//     (host.cpp) knows nothing of it;
//   * fill CPython's pending-call ring from a foreign thread while the main
//     thread stays in C++ (no pending call can run), then release a driver's
//     held destructor calls;
//   * add the host's pending call as the last thing before CPython's
//     exit-time flush: threading._shutdown is wrapped by a C function that
//     releases a driver's held destructor calls and waits for them, so the
//     call is first run by _Py_FinishPendingCalls.
#include <pybind11/critical_section.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <thread>

#include "host.hpp"

namespace deferred_cleanup::host {

namespace {

struct GateHold {
  std::mutex mu;
  std::condition_variable cv;
  bool armed = false;
  bool until_release = false;
  std::chrono::milliseconds hold{0};
  bool held = false;
  bool released = false;
  int passes = 0;  // producers that went through the hook while armed
  // Released by the held producer once the exit sequence has closed the gate
  // (then it waits for that driver's calls before it leaves): a producer
  // that pushes while the exit sequence waits out the gate.
  std::shared_ptr<SimulatedDriver> release_at_close;
};
GateHold g_hold;
// Fast path: a producer that finds the hook disarmed takes no lock.  Set with
// release by arm_gate_hold after the parameters are written under g_hold.mu;
// the acquire load in test_hook_in_gate pairs with it (the mutex re-checks).
std::atomic<bool> g_hold_armed{false};
// Pending calls still to be lost (test hook); decremented by the producer
// that loses one.
std::atomic<int> g_lose_calls{0};
std::atomic<int> g_noop_runs{0};

// The Host's own add_pending_call, saved when the wrapper is installed.
int (*g_real_add_pending_call)(PendingCallFn, void*) = nullptr;

/// Host::add_pending_call while the lose-call hook is installed: lose the
/// call (report it accepted, never add it) while calls are still to be lost,
/// otherwise call the host's own.  Thread: any producer, as the host's.
int lose_or_add_pending_call(PendingCallFn fn, void* arg) {
  int n = g_lose_calls.load(std::memory_order_relaxed);  // test setting
  while (n > 0) {
    // One producer per lost call; orders nothing else.
    if (g_lose_calls.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) return 0;
  }
  return g_real_add_pending_call(fn, arg);
}

/// Install the wrapper once (main thread, GIL held).  The Host's function
/// pointer is a plain field that producers read: the first _test_lose_calls
/// must be made while no destructor runs (the tests call it with the driver
/// idle or holding); it is never uninstalled, so later calls only store the
/// count.
void install_lose_call_hook() {
  if (g_real_add_pending_call != nullptr) return;
  g_real_add_pending_call = g_host.add_pending_call;
  g_host.add_pending_call = &lose_or_add_pending_call;
}

int noop_pending(void*) {
  g_noop_runs.fetch_add(1, std::memory_order_relaxed);  // statistics only
  return 0;
}

py::dict test_saturate(const std::shared_ptr<SimulatedDriver>& d, int threads, int max_fill) {
  int filled = 0;
  int extra_rc = 0;
  std::thread filler([&] {
    while (filled < max_fill && Py_AddPendingCall(&noop_pending, nullptr) == 0) ++filled;
    extra_rc = Py_AddPendingCall(&noop_pending, nullptr);  // one more, must be refused
    if (extra_rc == 0) ++filled;
  });
  filler.join();
  py::dict before = counters();
  const std::size_t released = d->release(threads);
  const bool idle = d->wait_idle(std::chrono::seconds(30));
  py::dict after = counters();
  py::dict r;
  r["filled"] = filled;
  r["refused_rc"] = extra_rc;
  r["released"] = released;
  r["idle"] = idle;
  r["before"] = before;
  r["after"] = after;
  return r;
}

void arm_gate_hold(py::object hold_ms, std::shared_ptr<SimulatedDriver> release_at_close) {
  std::lock_guard<std::mutex> lk(g_hold.mu);
  g_hold.release_at_close = std::move(release_at_close);
  g_hold.armed = true;
  g_hold.released = false;
  g_hold.held = false;
  g_hold.until_release = hold_ms.is_none();
  g_hold.hold = std::chrono::milliseconds(hold_ms.is_none() ? 0 : hold_ms.cast<long>());
  g_hold_armed.store(true,
                     std::memory_order_release);  // pairs with test_hook_in_gate's acquire load
}

bool wait_gate_held(double timeout_s) {
  const auto t = checked_timeout(timeout_s, "_test_wait_gate_held");
  return without_gil([&] {
    std::unique_lock<std::mutex> lk(g_hold.mu);
    return g_hold.cv.wait_for(lk, t, [] { return g_hold.held; });
  });
}

void release_gate() {
  {
    std::lock_guard<std::mutex> lk(g_hold.mu);
    g_hold.released = true;
  }
  g_hold.cv.notify_all();
}

/// The held producer, before its hold: wait until the reference queue is
/// closed (bounded 20 s), let the exit sequence run on for 50 ms, then
/// release `d`'s held destructor calls and wait for them (5 s bound).
/// Thread: the held producer, g_hold.mu not held.
void release_when_closed(SimulatedDriver& d) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (g_reference != nullptr && g_reference->accepting() &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  d.release(1);
  d.wait_idle(std::chrono::milliseconds(5000));
}

}  // namespace

void test_hook_in_gate(const void*) {
  if (!g_hold_armed.load(std::memory_order_acquire))
    return;  // pairs with arm_gate_hold's release store
  std::unique_lock<std::mutex> lk(g_hold.mu);
  if (!g_hold.armed) return;
  g_hold_armed.store(false,
                     std::memory_order_relaxed);  // under g_hold.mu; a hint for the fast path
  g_hold.armed = false;
  g_hold.held = true;
  g_hold.cv.notify_all();
  if (auto d = std::move(g_hold.release_at_close)) {
    lk.unlock();
    release_when_closed(*d);
    lk.lock();
  }
  // "until released" still has a safety bound, so a broken test cannot hang.
  const auto bound = g_hold.until_release ? std::chrono::milliseconds(20000) : g_hold.hold;
  g_hold.cv.wait_for(lk, bound, [] { return g_hold.released; });
  g_hold.held = false;
  ++g_hold.passes;
  g_hold.cv.notify_all();
}

void test_hooks_at_backstop() {
  {
    std::lock_guard<std::mutex> lk(g_hold.mu);
    g_hold.released = true;
    g_hold.armed = false;
    g_hold_armed.store(false, std::memory_order_relaxed);  // under g_hold.mu; fast-path hint only
  }
  g_hold.cv.notify_all();
  // Wait (bounded) until a held producer has left the hook; it then calls
  // the host, which the backstop waits for too.
  std::unique_lock<std::mutex> lk(g_hold.mu);
  g_hold.cv.wait_for(lk, std::chrono::seconds(5), [] { return !g_hold.held; });
}

void test_hooks_after_fork() {
  // The child has one thread: a producer held in the parent does not exist
  // here.  New lock and condition variable; nothing held, nothing armed.
  new (&g_hold.mu) std::mutex;
  new (&g_hold.cv) std::condition_variable;
  g_hold.held = false;
  g_hold.armed = false;
  g_hold_armed.store(false, std::memory_order_relaxed);  // one thread in the child
}

/// How many payloads of a graph the producer's fast path samples for a
/// stale-claim check (sample_stale_check, callback.hpp, at the reference
/// policy's rate, ReferencePolicy::rearm_sample_log2, as hand_off() samples
/// them; the comparison variants never look): the choice is made by item
/// address, so a test that needs a producer to look at the claim's age
/// checks here that its burst holds at least one such payload.  Main
/// thread, GIL held, under the graph's critical section like attach().
std::size_t test_stale_sampled(py::handle graph) {
  py::scoped_critical_section cs{graph};
  std::size_t n = 0;
  for (PyPayload* p : py::cast<PyGraph&>(graph).payloads) {
    n += sample_stale_check<ReferencePolicy::rearm_sample_log2>(&p->item);
  }
  return n;
}

int test_gate_hook_passes() {
  std::lock_guard<std::mutex> lk(g_hold.mu);
  return g_hold.passes;
}

// The driver whose held destructor calls the wrapped threading._shutdown
// releases (main thread, GIL held: written once by the hook's installer,
// read and reset by the wrapper).
std::shared_ptr<SimulatedDriver> g_flush_driver;
int g_flush_threads = 1;

/// Install a wrapper of threading._shutdown (main thread, GIL held).
///
/// Py_FinalizeEx calls threading._shutdown through wait_for_thread_shutdown
/// (PyObject_CallMethodNoArgs) and then, with no Python frame run in
/// between, _Py_FinishPendingCalls, before the atexit handlers
/// (Python/pylifecycle.c, Py_FinalizeEx and wait_for_thread_shutdown, the
/// same order at v3.10.0, v3.11.0, v3.12.0, v3.13.0 and v3.14.0).  The
/// wrapper is a C function: it calls the original, then releases the
/// driver's held destructor calls from `threads` native threads and waits,
/// keeping the GIL, until each destructor call has returned (each push made,
/// the host's pending call added by a foreign thread).  No bytecode runs on
/// the main thread after the add, so no eval breaker check can run the call
/// early: the first run of the host's pending call is CPython's exit-time
/// flush, on every interpreter, whatever the load.  The wait is a hang
/// guard of 120 s; past it a line goes to stderr.
void release_at_exit_flush(std::shared_ptr<SimulatedDriver> d, int threads) {
  if (!d) throw py::type_error("_test_release_at_exit_flush: driver must be a SimulatedDriver");
  if (threads < 1) throw py::value_error("_test_release_at_exit_flush: threads must be >= 1");
  if (g_flush_driver) throw std::logic_error("_test_release_at_exit_flush: already installed");
  g_flush_driver = std::move(d);
  g_flush_threads = threads;
  py::module_ threading = py::module_::import("threading");
  py::object original = threading.attr("_shutdown");
  threading.attr("_shutdown") = py::cpp_function([original]() {
    original();  // the threading module's own exit: joins non-daemon threads
    std::shared_ptr<SimulatedDriver> drv = std::move(g_flush_driver);
    if (!drv) return;
    drv->release(g_flush_threads);
    if (!drv->wait_idle(std::chrono::seconds(120))) {  // hang guard, not a timing
      std::fprintf(stderr,
                   "_test_release_at_exit_flush: destructor calls still due after 120 s (hang "
                   "guard)\n");
    }
  });
}

void register_test_hooks(py::module_& m) {
  m.def(
      "_test_saturate", &test_saturate, py::arg("driver"), py::arg("threads") = 8,
      py::arg("max_fill") = 4096,
      "_test_saturate(driver: SimulatedDriver, threads: int = 8, max_fill: int = 4096) -> dict\n\n"
      "With the main thread kept in C++ (no pending call can run), fill CPython's pending-call "
      "ring from a "
      "foreign thread (at most max_fill calls plus one that must be refused), then release the "
      "driver's held "
      "destructor calls from `threads` threads and wait for them (30 s bound). Returns filled "
      "(int), "
      "refused_rc (int), released (int), idle (bool), before and after (counter dicts).");
  m.def(
      "_test_noop_runs", [] { return g_noop_runs.load(std::memory_order_relaxed); },
      "_test_noop_runs() -> int\n\nHow many of _test_saturate's no-op pending calls have run.");
  m.def("_test_arm_gate_hold", &arm_gate_hold, py::arg("hold_ms") = py::none(),
        py::arg("release_at_close") = nullptr,
        "_test_arm_gate_hold(hold_ms: int | None = None, release_at_close: SimulatedDriver | "
        "None = None) -> None\n\nHold the next producer that "
        "reaches the "
        "window before Py_AddPendingCall for hold_ms milliseconds, or (None) until "
        "_test_release_gate() or "
        "the Py_AtExit backstop releases it (20 s safety bound).  With release_at_close, the "
        "held producer first waits until the exit sequence closes the gate, then 50 ms, then "
        "releases that driver's held destructor calls and waits for them (5 s).");
  m.def("_test_wait_gate_held", &wait_gate_held, py::arg("timeout_s") = 10.0,
        "_test_wait_gate_held(timeout_s: float = 10.0) -> bool\n\nWait (GIL released) until a "
        "producer is "
        "held in the window; False on timeout.");
  m.def("_test_release_gate", &release_gate,
        "_test_release_gate() -> None\n\nRelease a producer held by _test_arm_gate_hold.");
  m.def("_test_gate_hook_passes", &test_gate_hook_passes,
        "_test_gate_hook_passes() -> int\n\nProducers that went through the armed hook.");
  m.def("_test_stale_sampled", &test_stale_sampled, py::arg("graph"),
        "_test_stale_sampled(graph: Graph) -> int\n\nHow many payloads the graph owns (not "
        "destroyed) are chosen by the destructor's fast path to check the claim's age (by item "
        "address, at the reference policy's sampling, callback.hpp). Not an entry point. "
        "Raises TypeError unless graph is a Graph.");
  m.def(
      "_test_lose_calls",
      [](int n) {
        if (n < 0) throw py::value_error("_test_lose_calls: n must be >= 0");
        g_lose_calls.store(n, std::memory_order_relaxed);  // test setting
        if (n > 0) install_lose_call_hook();
      },
      py::arg("n"),
      "_test_lose_calls(n: int) -> None\n\nThe next n pending calls are lost: the host reports "
      "them "
      "accepted and drops them, as CPython 3.10/3.11 lose a call added while a subinterpreter "
      "holds the GIL.");
  m.def("_test_release_at_exit_flush", &release_at_exit_flush, py::arg("driver"),
        py::arg("threads") = 1,
        "_test_release_at_exit_flush(driver: SimulatedDriver, threads: int = 1) -> None\n\n"
        "Main thread.  Wrap threading._shutdown with a C function that calls it, then releases "
        "the driver's held destructor calls from `threads` threads and waits for them with the "
        "GIL held (hang guard 120 s), so the host's pending call, added by a foreign thread, is "
        "first run by CPython's exit-time flush (_Py_FinishPendingCalls, which Py_FinalizeEx "
        "calls right after threading._shutdown).  Raises ValueError if threads < 1, RuntimeError "
        "if already installed.");
}

}  // namespace deferred_cleanup::host
