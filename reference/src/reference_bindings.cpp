// reference_bindings.cpp: the CPython host of the reference queue and its
// pybind11 bindings (deferred_cleanup._native).
//
// This is the only file of the reference that includes Python.h.  It gives
// the core (reference/include/deferred_cleanup/) its Host: Py_AddPendingCall
// and a main-thread test.  It owns the payload type (a Python object plus an
// optional finalizer, behind a DeferredCleanupItem), the Python-level entry
// points, which drain directly (gh-95820), the shutdown hook that
// deferred_cleanup/__init__.py registers with `atexit` (reference variant
// only), and the Py_AtExit backstop (both variants).
//
// Test hooks (names start with `_test_`): hold one producer inside the gate
// window; fill CPython's pending-call ring from a foreign thread while the
// main thread stays in C++; release simulated drivers' held callbacks from
// the backstop; write the final counters as JSON with C stdio at the backstop
// (env DC_STATS_AT_EXIT=<path>).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "deferred_cleanup/callback.hpp"
#include "deferred_cleanup/drain.hpp"
#include "deferred_cleanup/driver.hpp"
#include "deferred_cleanup/item.hpp"
#include "deferred_cleanup/queue.hpp"
#include "deferred_cleanup/scheduling.hpp"
#include "deferred_cleanup/shutdown.hpp"
#include "drivers.hpp"

namespace py = pybind11;
namespace dc = deferred_cleanup;

namespace {

// ---------------------------------------------------------------- errors

struct ShutdownError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct NotMainThreadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct GraphDestroyedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---------------------------------------------------------------- host

unsigned long g_main_ident = 0;  // threading.main_thread().ident, set at import

bool host_is_main_thread() { return PyThread_get_thread_ident() == g_main_ident; }

// Test hook: hold one producer inside the gate window (between its
// accepting_ check and Py_AddPendingCall).
struct GateHold {
  std::mutex mu;
  std::condition_variable cv;
  bool armed = false;
  bool until_release = false;
  std::chrono::milliseconds hold{0};
  bool held = false;
  bool released = false;
  int passes = 0;  // producers that went through the hook while armed
};
GateHold g_hold;
// Fast path: a producer that finds the hook disarmed takes no lock.  Set with
// release by _test_arm_gate_hold after the hold parameters are written under
// g_hold.mu; the acquire load here pairs with it (the mutex then re-checks).
std::atomic<bool> g_hold_armed{false};

void host_in_gate(const dc::Queue&) {
  if (!g_hold_armed.load(std::memory_order_acquire)) return;  // pairs with test_arm_gate_hold's release store
  std::unique_lock<std::mutex> lk(g_hold.mu);
  if (!g_hold.armed) return;
  g_hold_armed.store(false, std::memory_order_relaxed);  // under g_hold.mu; only a hint for the fast path
  g_hold.armed = false;
  g_hold.held = true;
  g_hold.cv.notify_all();
  // "until released" still has a safety bound, so a broken test cannot hang.
  const auto bound = g_hold.until_release ? std::chrono::milliseconds(20000) : g_hold.hold;
  g_hold.cv.wait_for(lk, bound, [] { return g_hold.released; });
  g_hold.held = false;
  ++g_hold.passes;
  g_hold.cv.notify_all();
}

dc::Host g_host{&Py_AddPendingCall, &host_is_main_thread, &host_in_gate};
dc::Queue* g_queue = nullptr;  // published once at import, never freed

// Main-thread bookkeeping for tests and the GPU report (relaxed counters).
std::atomic<std::uint64_t> g_cleanups_on_main{0};
std::atomic<std::uint64_t> g_cleanups_off_main{0};
std::atomic<std::uint64_t> g_destructors_on_main{0};
std::atomic<std::uint64_t> g_cleanups_after_shutdown{0};
std::atomic<unsigned long> g_last_destructor_thread{0};
std::atomic<std::int64_t> g_last_cleanup_ns{0};
std::set<unsigned long> g_destructor_threads;  // main thread only (under the GIL): distinct destructor threads seen
std::atomic<bool> g_shutdown_done{false};  // Python hook (reference) or backstop (seed) finished
std::atomic<int> g_noop_runs{0};
char g_stats_path[4096] = {0};
int g_atexit_rc = 0;

// ---------------------------------------------------------------- payload

/// A Python object (and optional finalizer) kept alive until its user object
/// dies; the allocation embeds the item.
struct PyPayload {
  dc::DeferredCleanupItem item;
  PyObject* obj = nullptr;        // strong reference
  PyObject* finalizer = nullptr;  // strong reference or nullptr
  unsigned long destructor_thread = 0;  // written by the destructor before the push
};

/// Save and restore the current exception around a cleanup, so a drain run
/// from a pending call or an entry point never clobbers or leaks one.
struct SavedError {
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* exc = PyErr_GetRaisedException();
  ~SavedError() { PyErr_SetRaisedException(exc); }
#else
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  SavedError() { PyErr_Fetch(&type, &value, &tb); }
  ~SavedError() { PyErr_Restore(type, value, tb); }
#endif
};

/// The cleanup: main thread, GIL held (pending call or entry point).  Calls
/// the finalizer with the object, drops both references.  Any Python error
/// goes to sys.unraisablehook; nothing escapes (noexcept).
void py_cleanup(void* arg) noexcept {
  auto* p = static_cast<PyPayload*>(arg);
  const unsigned long me = PyThread_get_thread_ident();
  // Statistics only (relaxed): none of these counters orders anything.
  (me == g_main_ident ? g_cleanups_on_main : g_cleanups_off_main).fetch_add(1, std::memory_order_relaxed);
  if (p->destructor_thread != 0 && p->destructor_thread == g_main_ident)
    g_destructors_on_main.fetch_add(1, std::memory_order_relaxed);  // statistics only
  // Written on the main thread by the shutdown hook / backstop, read here on
  // the main thread: program order, relaxed is enough.
  if (g_shutdown_done.load(std::memory_order_relaxed)) g_cleanups_after_shutdown.fetch_add(1, std::memory_order_relaxed);
  if (p->destructor_thread != 0) {
    try {
      g_destructor_threads.insert(p->destructor_thread);
    } catch (...) {
      // Out of memory while recording a statistic: skip the statistic.
    }
  }
  {
    SavedError saved;
    if (p->finalizer != nullptr) {
      PyObject* r = PyObject_CallOneArg(p->finalizer, p->obj);
      if (r == nullptr) {
        PyErr_WriteUnraisable(p->finalizer);  // a raising finalizer never stops the drain
      } else {
        Py_DECREF(r);
      }
    }
    Py_DECREF(p->obj);  // may run __del__; CPython reports its errors itself
    Py_XDECREF(p->finalizer);
    if (PyErr_Occurred()) PyErr_WriteUnraisable(nullptr);
  }
  delete p;
  g_last_cleanup_ns.store(now_ns(), std::memory_order_relaxed);  // statistics only (read on the main thread)
}

/// The user-object destructor handed to the driver: runs on a driver thread
/// with no thread state.  Records its thread (plain store, published by the
/// push) and does what callback.hpp allows: push, try to schedule.
void binding_destructor(void* arg) {
  auto* p = static_cast<PyPayload*>(arg);
  const auto self = static_cast<unsigned long>(pthread_self());
  p->destructor_thread = self;
  g_last_destructor_thread.store(self, std::memory_order_relaxed);  // report only
  dc::user_object_destructor(&p->item);
}

// ---------------------------------------------------------------- entry points

dc::Queue& queue() { return *g_queue; }

/// Every main-thread API entry point calls this first (gh-95820).
void entry() { dc::drain_at_entry(queue()); }

bool shut_down() { return !queue().host_alive() || !queue().accepting_snapshot(); }

py::dict counters() {
  dc::Queue& q = queue();
  const dc::Stats& s = q.stats;
  py::dict d;
  // statistics only: relaxed snapshot, synchronizes with nothing
  auto r = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  d["variant"] = q.variant() == dc::Variant::seed ? "seed" : "reference";
  d["created"] = r(s.created);
  d["enqueued"] = r(s.enqueued);
  d["enqueued_late"] = r(s.enqueued_late);
  d["cleaned"] = r(s.cleaned);
  d["direct_cleanups"] = r(s.direct_cleanups);
  d["schedule_attempts"] = r(s.schedule_attempts);
  d["schedule_failures"] = r(s.schedule_failures);
  d["pending_calls"] = r(s.pending_calls);
  d["drain_cycles"] = r(s.drain_cycles);
  d["pending_calls_ignored"] = r(s.pending_calls_ignored);
  d["direct_drains"] = r(s.direct_drains);
  d["retries"] = r(s.retries);
  d["leaked_at_shutdown"] = r(s.leaked_at_shutdown);
  d["gate_timeouts"] = r(s.gate_timeouts);
  d["host_calls_after_teardown"] = r(s.host_calls_after_teardown);
  // statistics only (relaxed snapshot)
  d["cleanups_on_main"] = g_cleanups_on_main.load(std::memory_order_relaxed);
  d["cleanups_off_main"] = g_cleanups_off_main.load(std::memory_order_relaxed);
  d["destructors_on_main"] = g_destructors_on_main.load(std::memory_order_relaxed);
  d["cleanups_after_shutdown"] = g_cleanups_after_shutdown.load(std::memory_order_relaxed);
  d["last_destructor_thread"] = g_last_destructor_thread.load(std::memory_order_relaxed);
  d["main_thread"] = g_main_ident;
  d["queue_empty"] = q.empty_snapshot();
  d["scheduled"] = q.scheduled_snapshot();
  d["accepting"] = q.accepting_snapshot();
  d["host_alive"] = q.host_alive();
  d["in_flight"] = q.in_flight();
  return d;
}

// ---------------------------------------------------------------- graphs

struct PyGraph {
  std::shared_ptr<dc::Driver> driver;
  dc::GraphHandle handle = 0;
  bool destroyed = false;
  std::size_t attached = 0;

  ~PyGraph() {
    if (!destroyed) {
      try {
        driver->destroy(handle);
      } catch (...) {
        // A graph object that dies undestroyed releases what it can; errors
        // here have nobody to go to.
      }
    }
  }
};

void graph_attach(PyGraph& g, py::object obj, py::object finalizer) {
  entry();
  if (g.destroyed) throw GraphDestroyedError("attach() on a destroyed graph: the object was not retained");
  if (shut_down()) throw ShutdownError("deferred_cleanup has shut down (interpreter exit): attach() refused, the object was not retained");
  if (!finalizer.is_none() && !PyCallable_Check(finalizer.ptr())) throw py::type_error("finalizer must be callable or None");
  auto* p = new PyPayload;
  p->obj = obj.inc_ref().ptr();
  p->finalizer = finalizer.is_none() ? nullptr : finalizer.inc_ref().ptr();
  dc::init_item(p->item, p, &py_cleanup);
  queue().stats.created.fetch_add(1, std::memory_order_relaxed);  // statistics only
  dc::AttachResult r;
  try {
    r = g.driver->attach(g.handle, &binding_destructor, p);
  } catch (...) {
    dc::cleanup_directly(queue(), &p->item);  // nothing was created: clean exactly once, here
    throw;
  }
  switch (r.status) {
    case dc::AttachStatus::attached:
      ++g.attached;
      return;
    case dc::AttachStatus::not_created:
      dc::cleanup_directly(queue(), &p->item);
      throw dc::DriverError(r.message + "; the object was released directly");
    case dc::AttachStatus::released:
      throw dc::DriverError(r.message + "; the object is released through the user object's destructor");
  }
}

void graph_instantiate(PyGraph& g) {
  entry();
  if (g.destroyed) throw GraphDestroyedError("instantiate() on a destroyed graph");
  g.driver->instantiate(g.handle);
}

void graph_destroy(PyGraph& g) {
  entry();
  if (g.destroyed) throw GraphDestroyedError("destroy() called twice: the graph is already destroyed");
  g.destroyed = true;  // even if the driver fails, never destroy twice
  g.driver->destroy(g.handle);
}

std::unique_ptr<PyGraph> create_graph(const std::shared_ptr<dc::Driver>& d) {
  entry();
  auto g = std::make_unique<PyGraph>();
  g->driver = d;
  g->handle = d->create_graph();
  return g;
}

// ---------------------------------------------------------------- drivers

/// A CUDA driver with its info, as one Driver for the bindings.
class CudaDriverBox final : public dc::Driver {
 public:
  explicit CudaDriverBox(const dc::CudaOptions& o) : inner_(dc::make_cuda_driver(&info_, o)) {}
  const char* name() const noexcept override { return "cuda"; }
  dc::GraphHandle create_graph() override { return inner_->create_graph(); }
  dc::AttachResult attach(dc::GraphHandle g, dc::DestructorFn fn, void* arg) override { return inner_->attach(g, fn, arg); }
  void instantiate(dc::GraphHandle g) override { inner_->instantiate(g); }
  void destroy(dc::GraphHandle g) override { inner_->destroy(g); }
  const dc::CudaInfo& info() const { return info_; }

 private:
  dc::CudaInfo info_;
  std::unique_ptr<dc::Driver> inner_;
};

// Simulated drivers whose held callbacks the backstop releases (kept alive
// until then), and every simulated driver, so the backstop can wait for them.
std::mutex g_drivers_mu;
std::vector<std::pair<std::shared_ptr<dc::SimulatedDriver>, int>> g_release_at_exit;
std::vector<std::weak_ptr<dc::SimulatedDriver>> g_sim_drivers;

// ---------------------------------------------------------------- shutdown

const char* kStatsKeys[] = {"created", "enqueued", "enqueued_late", "cleaned", "direct_cleanups",
                            "schedule_attempts", "schedule_failures", "pending_calls", "drain_cycles",
                            "pending_calls_ignored", "direct_drains", "retries", "leaked_at_shutdown",
                            "gate_timeouts", "host_calls_after_teardown"};

void write_stats_json(const char* path, std::uint64_t in_flight_at_backstop) {
  // Plain C stdio: the interpreter is gone.  Counter loads are relaxed
  // snapshots (statistics only); the backstop runs after every producer it
  // waited for.
  FILE* f = std::fopen(path, "w");
  if (f == nullptr) return;
  const dc::Stats& s = queue().stats;
  const std::atomic<std::uint64_t>* vals[] = {&s.created, &s.enqueued, &s.enqueued_late, &s.cleaned,
                                             &s.direct_cleanups, &s.schedule_attempts, &s.schedule_failures,
                                             &s.pending_calls, &s.drain_cycles, &s.pending_calls_ignored,
                                             &s.direct_drains, &s.retries, &s.leaked_at_shutdown, &s.gate_timeouts,
                                             &s.host_calls_after_teardown};
  std::fprintf(f, "{\"variant\": \"%s\"", queue().variant() == dc::Variant::seed ? "seed" : "reference");
  for (std::size_t i = 0; i < sizeof vals / sizeof vals[0]; ++i)
    std::fprintf(f, ", \"%s\": %llu", kStatsKeys[i], static_cast<unsigned long long>(vals[i]->load(std::memory_order_relaxed)));  // statistics only
  std::fprintf(f, ", \"cleanups_after_shutdown\": %llu",
               static_cast<unsigned long long>(g_cleanups_after_shutdown.load(std::memory_order_relaxed)));
  std::fprintf(f, ", \"cleanups_off_main\": %llu",
               static_cast<unsigned long long>(g_cleanups_off_main.load(std::memory_order_relaxed)));
  std::fprintf(f, ", \"in_flight_at_backstop\": %llu", static_cast<unsigned long long>(in_flight_at_backstop));
  std::fprintf(f, ", \"gate_hook_passes\": %d", g_hold.passes);
  std::fprintf(f, "}\n");
  std::fclose(f);
}

/// Py_AtExit backstop (both variants): no Python API from here on.
void backstop() {
  dc::Queue& q = queue();
  q.close();  // the seed's only shutdown step; already done by the reference hook
  // Py_AtExit callbacks run after the interpreter is gone (py_atexit.initialized
  // in cpython_facts), so the host is dead from here on in both variants; a
  // producer released below that calls the host is counted in
  // stats.host_calls_after_teardown.
  q.mark_host_dead();
  g_shutdown_done.store(true, std::memory_order_relaxed);  // read by py_cleanup on this same (main) thread: program order
  // Test hook: a producer held inside the gate is released now, after
  // finalization, and we wait for it to leave the gate (bounded).
  {
    std::lock_guard<std::mutex> lk(g_hold.mu);
    g_hold.released = true;
    g_hold.armed = false;
    g_hold_armed.store(false, std::memory_order_relaxed);  // under g_hold.mu; fast-path hint only
  }
  g_hold.cv.notify_all();
  std::uint64_t waited = 0;
  dc::wait_gate(q, std::chrono::seconds(5), waited);
  // Test hook: simulated callbacks held for "after finalization".
  std::vector<std::pair<std::shared_ptr<dc::SimulatedDriver>, int>> late;
  std::vector<std::shared_ptr<dc::SimulatedDriver>> all;
  {
    std::lock_guard<std::mutex> lk(g_drivers_mu);
    late.swap(g_release_at_exit);
    for (auto& w : g_sim_drivers)
      if (auto d = w.lock()) all.push_back(std::move(d));
  }
  for (auto& [d, threads] : late) d->release(threads);
  for (auto& d : all) d->wait_idle(std::chrono::seconds(5));
  const std::uint64_t in_flight = q.in_flight();
  dc::backstop_at_exit(q);
  if (g_stats_path[0] != '\0') write_stats_json(g_stats_path, in_flight);
  // Objects in `late`/`all` are leaked on purpose: destroying a driver here
  // could run more destructors; the process is about to end.
  for (auto& [d, threads] : late) new std::shared_ptr<dc::SimulatedDriver>(std::move(d));
  for (auto& d : all) new std::shared_ptr<dc::SimulatedDriver>(std::move(d));
}

py::dict python_shutdown() {
  // Reference only: registered with `atexit` by deferred_cleanup/__init__.py.
  dc::ShutdownOutcome out = dc::shutdown_at_exit(queue(), dc::kDefaultGateBound);
  g_shutdown_done.store(true, std::memory_order_relaxed);  // read by py_cleanup on this same (main) thread: program order
  py::dict d;
  d["gate_clear"] = out.gate_clear;
  d["waited_us"] = out.waited_us;
  d["final_drained"] = out.final_drained;
  return d;
}

// ---------------------------------------------------------------- test hooks

int noop_pending(void*) {
  g_noop_runs.fetch_add(1, std::memory_order_relaxed);  // statistics only; read by _test_noop_runs on the main thread
  return 0;
}

/// Saturation: with the main thread held in C++ (GIL held, so no pending call
/// can run), fill the pending-call ring from a foreign thread, then release
/// the driver's held callbacks and wait for them.  Returns what happened.
py::dict test_saturate(const std::shared_ptr<dc::SimulatedDriver>& d, int threads, int max_fill) {
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

void test_arm_gate_hold(py::object hold_ms) {
  std::lock_guard<std::mutex> lk(g_hold.mu);
  g_hold.armed = true;
  g_hold.released = false;
  g_hold.held = false;
  g_hold.until_release = hold_ms.is_none();
  g_hold.hold = std::chrono::milliseconds(hold_ms.is_none() ? 0 : hold_ms.cast<long>());
  g_hold_armed.store(true, std::memory_order_release);  // pairs with host_in_gate's acquire load
}

bool test_wait_gate_held(double timeout_s) {
  py::gil_scoped_release nogil;
  std::unique_lock<std::mutex> lk(g_hold.mu);
  return g_hold.cv.wait_for(lk, std::chrono::duration<double>(timeout_s), [] { return g_hold.held; });
}

void test_release_gate() {
  {
    std::lock_guard<std::mutex> lk(g_hold.mu);
    g_hold.released = true;
  }
  g_hold.cv.notify_all();
}

}  // namespace

namespace deferred_cleanup::bindings {

void register_reference(py::module_& m) {
  // Shutdown state, explicitly, at import (issue 3 Part 1.6).
  const char* v = std::getenv("DEFERRED_CLEANUP_VARIANT");
  dc::Variant variant = dc::Variant::reference;
  if (v != nullptr && v[0] != '\0') {
    if (std::strcmp(v, "seed") == 0) {
      variant = dc::Variant::seed;
    } else if (std::strcmp(v, "reference") != 0) {
      throw py::value_error(std::string("DEFERRED_CLEANUP_VARIANT must be 'reference' or 'seed', not '") + v + "'");
    }
  }
  g_main_ident = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  const char* stats_path = std::getenv("DC_STATS_AT_EXIT");
  if (stats_path != nullptr) std::snprintf(g_stats_path, sizeof g_stats_path, "%s", stats_path);
  g_queue = dc::publish_queue(new dc::Queue(variant, &g_host));  // never freed
  g_atexit_rc = Py_AtExit(&backstop);

  // pybind11 tries the most recently registered translator first, so the
  // subclass DriverUnavailable is registered after its base DriverError.
  auto& driver_error = py::register_exception<dc::DriverError>(m, "DriverError", PyExc_RuntimeError);
  py::register_exception<dc::DriverUnavailable>(m, "DriverUnavailable", driver_error.ptr());
  py::register_exception<ShutdownError>(m, "ShutdownError", PyExc_RuntimeError);
  py::register_exception<NotMainThreadError>(m, "NotMainThreadError", PyExc_RuntimeError);
  py::register_exception<GraphDestroyedError>(m, "GraphDestroyedError", PyExc_RuntimeError);

  m.def("variant", [] { return queue().variant() == dc::Variant::seed ? "seed" : "reference"; },
        "variant() -> str\n\nReturns 'reference' or 'seed' (fixed at import). Raises nothing.");
  m.def(
      "stats",
      [] {
        entry();
        return counters();
      },
      "stats() -> dict\n\nAn entry point (drains directly on the main thread of the reference), then the "
      "counters; see deferred_cleanup.stats. Raises nothing.");
  m.def("counters", &counters,
        "counters() -> dict\n\nThe counters as a relaxed snapshot; not an entry point. Raises nothing.");
  m.def(
      "drain_now",
      [] {
        if (!host_is_main_thread()) throw NotMainThreadError("drain_now() may only be called on the main thread");
        if (!queue().host_alive()) throw ShutdownError("deferred_cleanup has shut down: nothing is drained any more");
        if (queue().draining()) return std::size_t{0};
        queue().stats.direct_drains.fetch_add(1, std::memory_order_relaxed);  // statistics only
        return dc::drain_all(queue());
      },
      "drain_now() -> int\n\nRun every queued cleanup on the main thread; returns the number run.\n"
      "Raises NotMainThreadError off the main thread, ShutdownError after shutdown.");
  m.def(
      "poll",
      [] {
        dc::EntryAction a = dc::drain_at_entry(queue());
        return a == dc::EntryAction::drained ? "drained" : a == dc::EntryAction::rescheduled ? "rescheduled" : "nothing";
      },
      "poll() -> str\n\nThe entry-point step alone: 'drained', 'rescheduled' or 'nothing'. Raises nothing.");
  m.def("_shutdown", &python_shutdown,
        "_shutdown() -> dict\n\nThe reference shutdown sequence (atexit hook): close, wait the gate, final "
        "drain, host dead. Returns gate_clear (bool), waited_us (int, microseconds), final_drained (int).");
  m.def("_atexit_registered", [] { return g_atexit_rc == 0; },
        "_atexit_registered() -> bool\n\nWhether Py_AtExit accepted the backstop.");
  m.def("last_cleanup_ns", [] { return g_last_cleanup_ns.load(std::memory_order_relaxed);  /* statistics only */ },
        "last_cleanup_ns() -> int\n\nsteady_clock time (ns) of the last cleanup, 0 if none.");
  m.def("now_ns", &now_ns, "now_ns() -> int\n\nsteady_clock time in ns (the clock of last_cleanup_ns).");
  m.def(
      "destructor_threads",
      [] { return std::vector<unsigned long>(g_destructor_threads.begin(), g_destructor_threads.end()); },
      "destructor_threads() -> list[int]\n\nDistinct pthread ids of the threads that ran the destructors of "
      "cleaned payloads (since the last reset).");
  m.def("_test_reset_destructor_threads", [] { g_destructor_threads.clear(); },
        "_test_reset_destructor_threads() -> None\n\nForget the recorded destructor threads.");
  m.def("_test_saturate", &test_saturate, py::arg("driver"), py::arg("threads") = 8, py::arg("max_fill") = 4096,
        "_test_saturate(driver: SimulatedDriver, threads: int = 8, max_fill: int = 4096) -> dict\n\n"
        "With the main thread kept in C++ (no pending call can run), fill CPython's pending-call ring from a "
        "foreign thread (at most max_fill calls plus one that must be refused), then release the driver's held "
        "destructor calls from `threads` threads and wait for them (30 s bound). Returns filled (int), "
        "refused_rc (int), released (int), idle (bool), before and after (counter dicts).");
  m.def("_test_noop_runs", [] { return g_noop_runs.load(std::memory_order_relaxed);  /* statistics only */ },
        "_test_noop_runs() -> int\n\nHow many of _test_saturate's no-op pending calls have run.");
  m.def("_test_arm_gate_hold", &test_arm_gate_hold, py::arg("hold_ms") = py::none(),
        "_test_arm_gate_hold(hold_ms: int | None = None) -> None\n\nHold the next producer that passes the "
        "gate check for hold_ms milliseconds, or (None) until _test_release_gate() or the Py_AtExit backstop "
        "releases it (20 s safety bound).");
  m.def("_test_wait_gate_held", &test_wait_gate_held, py::arg("timeout_s") = 10.0,
        "_test_wait_gate_held(timeout_s: float = 10.0) -> bool\n\nWait (GIL released) until a producer is "
        "held in the gate; False on timeout.");
  m.def("_test_release_gate", &test_release_gate,
        "_test_release_gate() -> None\n\nRelease a producer held by _test_arm_gate_hold.");

  // Registered before the drivers so that the signature pybind11 generates
  // for Driver.create_graph names deferred_cleanup._native.Graph, not the
  // C++ type.
  py::class_<PyGraph> graph_class(m, "Graph", "A graph of a driver; created by Driver.create_graph().");

  py::class_<dc::Driver, std::shared_ptr<dc::Driver>>(m, "Driver",
                                                      "Base class of the drivers (the C++ seam driver.hpp).")
      .def_property_readonly(
          "name", [](const dc::Driver& d) { return std::string(d.name()); }, "str: 'simulated' or 'cuda'.")
      .def("create_graph", &create_graph,
           "create_graph() -> Graph\n\nAn entry point; creates an empty graph. Raises DriverError.");

  py::class_<dc::SimulatedDriver, dc::Driver, std::shared_ptr<dc::SimulatedDriver>>(
      m, "SimulatedDriver",
      "SimulatedDriver()\n\nReference-counted user objects whose destructors run on a dedicated native "
      "thread with no Python thread state, plus test controls (hold, burst release, failure injection).")
      .def(py::init([] {
        entry();
        auto d = std::make_shared<dc::SimulatedDriver>();
        std::lock_guard<std::mutex> lk(g_drivers_mu);
        std::erase_if(g_sim_drivers, [](const std::weak_ptr<dc::SimulatedDriver>& w) { return w.expired(); });
        g_sim_drivers.emplace_back(d);
        return d;
      }))
      .def("set_hold", &dc::SimulatedDriver::set_hold, py::arg("hold"),
           "set_hold(hold: bool) -> None\n\nHold destructor calls back (True) or deliver them (False); "
           "turning holding off does not release what is held. Raises nothing.")
      .def_property_readonly("held", &dc::SimulatedDriver::held, "int: destructor calls held back now.")
      .def(
          "release",
          [](dc::SimulatedDriver& d, int threads) {
            if (threads < 1) throw py::value_error("release: threads must be >= 1");
            return d.release(threads);
          },
          py::arg("threads") = 8,
          "release(threads: int = 8) -> int\n\nRelease every held destructor call in one burst from `threads` "
          "native threads (at least 1) that start together at a barrier; returns at once with the number "
          "released. Raises ValueError for threads < 1.")
      .def(
          "wait_idle",
          [](dc::SimulatedDriver& d, double timeout_s) {
            if (!(timeout_s >= 0.0)) throw py::value_error("wait_idle: timeout_s must be >= 0 seconds");
            py::gil_scoped_release nogil;
            return d.wait_idle(std::chrono::milliseconds(static_cast<long>(timeout_s * 1000)));
          },
          py::arg("timeout_s") = 10.0,
          "wait_idle(timeout_s: float = 10.0) -> bool\n\nWait (GIL released) until every due destructor call "
          "returned; False on timeout (seconds). Not an entry point. Raises ValueError for a negative or NaN "
          "timeout.")
      .def(
          "fail_next_creates",
          [](dc::SimulatedDriver& d, int n) {
            if (n < 0) throw py::value_error("fail_next_creates: n must be >= 0");
            d.fail_next_creates(n);
          },
          py::arg("n"),
          "fail_next_creates(n: int) -> None\n\nThe next n attach() calls fail before a user object exists "
          "(the payload is cleaned directly and DriverError raised). Raises ValueError for n < 0.")
      .def(
          "fail_next_retains",
          [](dc::SimulatedDriver& d, int n) {
            if (n < 0) throw py::value_error("fail_next_retains: n must be >= 0");
            d.fail_next_retains(n);
          },
          py::arg("n"),
          "fail_next_retains(n: int) -> None\n\nThe next n attach() calls create the user object, then fail "
          "to hand it to the graph (its destructor fires; DriverError raised). Raises ValueError for n < 0.")
      .def_property_readonly("last_release_ns", &dc::SimulatedDriver::last_release_ns,
                             "int: steady_clock time (ns) at which the last burst passed its barrier, or 0.")
      .def_property_readonly("delivered", &dc::SimulatedDriver::delivered,
                             "int: destructor calls delivered so far.")
      .def(
          "_test_release_at_exit",
          [](const std::shared_ptr<dc::SimulatedDriver>& d, int threads) {
            std::lock_guard<std::mutex> lk(g_drivers_mu);
            g_release_at_exit.emplace_back(d, threads);
          },
          py::arg("threads") = 4,
          "_test_release_at_exit(threads: int = 4) -> None\n\nKeep this driver alive until the Py_AtExit "
          "backstop, which releases its held destructor calls from `threads` threads after finalization and "
          "waits for them.");

  py::class_<CudaDriverBox, dc::Driver, std::shared_ptr<CudaDriverBox>>(
      m, "CudaDriver",
      "CudaDriver(spin_us: int = 0)\n\nThe CUDA driver API, opened at run time (dlopen libcuda.so.1, "
      "cuGetProcAddress), on device 0's primary context. spin_us > 0 (microseconds): every graph also holds "
      "one kernel node spinning that long before its empty node, so a launch keeps its user objects alive "
      "that long. Raises DriverUnavailable naming the reason (no cuda.h at build time, no libcuda, cuInit "
      "failure, no device), DriverError (spin kernel failed to load), ValueError (spin_us < 0).")
      .def(py::init([](long long spin_us) {
             entry();
             if (spin_us < 0) throw py::value_error("CudaDriver: spin_us must be >= 0 microseconds");
             return std::make_shared<CudaDriverBox>(dc::CudaOptions{static_cast<std::uint64_t>(spin_us)});
           }),
           py::arg("spin_us") = 0)
      .def_property_readonly(
          "driver_version", [](const CudaDriverBox& d) { return d.info().driver_version; },
          "int: cuDriverGetVersion (e.g. 12080 for 12.8).")
      .def_property_readonly(
          "device_name", [](const CudaDriverBox& d) { return d.info().device_name; }, "str: cuDeviceGetName of device 0.");

  graph_class
      .def("attach", &graph_attach, py::arg("obj"), py::arg("finalizer") = py::none(),
           "attach(obj: object, finalizer: Callable[[object], None] | None = None) -> None\n\n"
           "An entry point. Keep obj alive until this graph's new user object dies; then, on the main thread, "
           "call finalizer(obj) (errors go to sys.unraisablehook) and drop obj.\n"
           "Raises GraphDestroyedError (graph destroyed), ShutdownError (interpreter exiting), TypeError "
           "(finalizer not callable): obj is not retained. DriverError: creation failed (obj released directly) "
           "or the hand-over failed (obj released through the destructor).")
      .def("instantiate", &graph_instantiate,
           "instantiate() -> None\n\nAn entry point. Instantiate the graph (CUDA: and launch it once, without "
           "waiting). Raises GraphDestroyedError, DriverError.")
      .def("destroy", &graph_destroy,
           "destroy() -> None\n\nAn entry point. Destroy the graph; user objects whose last reference goes "
           "away have their destructors called by the driver. Raises GraphDestroyedError when called twice, "
           "DriverError.")
      .def_property_readonly(
          "destroyed", [](const PyGraph& g) { return g.destroyed; }, "bool: destroy() was called.")
      .def_property_readonly(
          "attached", [](const PyGraph& g) { return g.attached; }, "int: objects attached successfully.");
}

}  // namespace deferred_cleanup::bindings
