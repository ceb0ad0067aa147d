// SPDX-License-Identifier: Apache-2.0
// host.hpp: what the files of the CPython host share.  They are split by
// lifetime:
//
//   host.cpp          while the interpreter lives: the CPython Host of each
//                     variant (Py_AddPendingCall through the pending-call
//                     trampoline, the main-thread test, the clock, the
//                     finalizing test), the payload and its cleanup, graphs,
//                     entry points, counters and configure();
//   exit.cpp          at exit: the exit sequence (reference), the Py_AtExit
//                     backstop (every variant) and its report;
//   fork.cpp          in a fork() child: the at-fork reset;
//   api_bindings.cpp  the Python API: drivers, graphs, stats, drain_now, poll
//                     (it only binds);
//   reference/testing/test_hooks.cpp
//                     (test builds only, DC_TEST_HOOKS) the `_test_`
//                     functions that hold a producer in the gate, fill
//                     CPython's pending-call ring, lose a call.
//
// The variant is chosen once, at import, from DEFERRED_CLEANUP_VARIANT; the
// queue of that variant is published and never freed.  with_queue() hands
// the one queue to a generic lambda with its static type, so every call site
// is compiled once per policy and each policy's orders stay constants.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "deferred_cleanup/callback.hpp"
#include "deferred_cleanup/comparison/policies.hpp"
#include "deferred_cleanup/driver.hpp"
#include "deferred_cleanup/policy.hpp"
#include "deferred_cleanup/queue.hpp"
#include "cpython/host_threads.hpp"  // src/cpython: the host library's producer count, fork reset
#include "cpython/exit_phase.hpp"    // src/cpython: the host library's exit order, exit wait
#include "cpython/interrupt.hpp"     // src/cpython: the host library's interrupt rule
#include "cpython/runtime.hpp"       // src/cpython: the host library's shared rules
#include "drivers.hpp"

namespace deferred_cleanup::host {

namespace py = pybind11;
// The variant matrix: the comparison policies' queues beside the reference.
using namespace deferred_cleanup::comparison;

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

// ---------------------------------------------------------------- the queue
extern Variant g_variant;
extern ReferenceQueue* g_reference;
extern SeedQueue* g_seed;
extern CudaCore12Queue* g_cuda_core;
extern CudaCore12FixedQueue* g_cuda_core_fixed;

/// Call f with the published queue of the variant chosen at import.
template <class F>
decltype(auto) with_queue(F&& f) {
  switch (g_variant) {
    case Variant::seed:
      return f(*g_seed);
    case Variant::cuda_core_1_2:
      return f(*g_cuda_core);
    case Variant::cuda_core_1_2_fixed:
      return f(*g_cuda_core_fixed);
    case Variant::reference:
      break;
  }
  return f(*g_reference);
}

/// The counters of the chosen queue (same type in every variant).
Stats& stats();

/// The user-object destructor of the chosen variant (handed to drivers).
DestructorFn destructor_fn();

// ---------------------------------------------------------------- host state
extern unsigned long g_main_ident;  // main thread (PyThread_get_thread_ident)
bool host_is_main_thread();
std::int64_t now_ns();                 // steady clock
extern std::atomic<bool> g_torn_down;  // the Py_AtExit backstop ran
/// Whether CPython's finalizing flag is set (Py_IsFinalizing, 3.13+;
/// _Py_IsFinalizing, 3.10-3.12).  Any thread.  The host library's
/// (src/cpython/runtime.hpp), shared with every extension's host.
using deferred_cleanup::cpython::detail::finalizing_now;

/// The Host the core calls (host.cpp); a test build's test_hooks.cpp may wrap its
/// add_pending_call (the lose-call hook).
extern Host g_host;

// Producers inside Py_AddPendingCall right now (host.cpp; the backstop waits
// for them, the at-fork reset zeroes it).  seq_cst increments.
extern std::atomic<std::uint32_t> g_in_host;
// The widest finalizing-check-to-call interval seen (statistics; host.cpp).
extern std::atomic<std::int64_t> g_check_to_call_max;
// The main thread is inside one of our pending calls (main thread only).
extern bool g_in_pending_call;
// The exit sequence is draining: drains do not stop early (main thread only).
extern bool g_exit_sequence_running;

// Host-side counters (relaxed; statistics only).
struct HostCounters {
  std::atomic<std::uint64_t> enqueued{0};       // destructor calls (pushes)
  std::atomic<std::uint64_t> enqueued_late{0};  // of those, after the door closed
  std::atomic<std::uint64_t> user_objects{0};   // user objects created (destructor due)
  std::atomic<std::uint64_t> cleanups_on_main{0};
  std::atomic<std::uint64_t> cleanups_off_main{0};
  std::atomic<std::uint64_t> destructors_on_main{0};
  std::atomic<std::uint64_t> cleanups_after_shutdown{0};
  std::atomic<std::uint64_t> host_calls_after_teardown{0};
  std::atomic<std::uint64_t> deferred_interrupts{0};    // KeyboardInterrupt/SystemExit re-raised
  std::atomic<std::uint64_t> interrupts_unraisable{0};  // later ones of a drain: sys.unraisablehook
  std::atomic<std::uint64_t> interrupts_held_at_flush{0};  // kept for the exit hook (no frame)
  std::atomic<std::uint64_t> forks_in_pending_call{
      0};                                      // child forked while main ran our pending call
  std::atomic<std::uint64_t> daemon_parks{0};  // threads parked by without_gil at finalization
  std::atomic<unsigned long> last_destructor_thread{0};
  std::atomic<std::int64_t> last_cleanup_ns{0};
  std::atomic<bool> shutdown_done{false};
};
extern HostCounters g_counters;

// ---------------------------------------------------------------- payload
struct PyGraph;

/// A Python object (and optional finalizer) kept alive until its user object
/// dies; the allocation embeds the item.
struct PyPayload {
  DeferredCleanupItem item;
  PyObject* obj = nullptr;              // strong reference
  PyObject* finalizer = nullptr;        // strong reference or nullptr
  unsigned long destructor_thread = 0;  // written by the destructor before the push
};

/// Create a payload (main thread, GIL held).
PyPayload* new_payload(py::handle obj, py::handle finalizer);

/// Release a payload whose user object was never created: on the main
/// thread directly; off the main thread through the queue, so the cleanup
/// still runs on the main thread.
void release_uncreated(PyPayload* p);

/// The entry-point step of the chosen variant; raises a KeyboardInterrupt or
/// SystemExit that a cleanup raised (the drain stopped after that cleanup).
void entry();

/// Raise the KeyboardInterrupt/SystemExit a cleanup raised, if any.
void raise_deferred_interrupt();

/// The host's interrupt rule (the host library's, src/cpython/interrupt.hpp),
/// for the shared exit wait (src/cpython/exit_phase.hpp).  Main thread, GIL
/// held.
deferred_cleanup::cpython::detail::InterruptRule& host_interrupts();

/// Whether shutdown closed the door (the API refuses new attachments).
bool shut_down();

/// Reference: step 4 of the shutdown (shutdown.hpp), mark the host dead,
/// once CPython's finalizing flag is set (Py_IsFinalizing, 3.13+;
/// _Py_IsFinalizing, 3.10-3.12).  Any thread; called by every entry point,
/// counters() and the pending-call trampoline.  Other variants: nothing.
void note_finalizing();

/// Reference: a graph destroyed on the main thread after the exit sequence
/// and before CPython finalizes (by an atexit handler that runs after it:
/// on 3.14+ one registered before the import) gets the sequence's step 0
/// again: wait, bounded by the exit wait, for the destructors that are due,
/// draining.  Main thread, GIL held (released while waiting).  Does nothing
/// in any other case or variant.
void release_after_exit();

/// What Py_AtExit returned for the backstop at import (exit.cpp): -1 when
/// CPython's table was full (NEXITFUNCS, Include/internal/pycore_atexit.h,
/// v3.12.0), reported once on stderr and as counters()["atexit_table_full"].
/// Written once at import (main thread), read by counters() (GIL held).
extern int g_atexit_rc;

/// The counters as a dict.
py::dict counters();

/// User objects whose destructor has not run, less those a live graph owns
/// (a relaxed snapshot of the host counters).
std::uint64_t destructors_due();

/// deferred_cleanup.drain_now(): the core's drain_now() (drain.hpp), its
/// refusals as exceptions.  Main thread, GIL held.  Raises
/// NotMainThreadError, ShutdownError, or a KeyboardInterrupt/SystemExit a
/// cleanup raised.
std::size_t drain_now();

// ---------------------------------------------------------------- graphs
/// A graph of a driver, as the Python object Graph holds it.
struct PyGraph {
  std::shared_ptr<Driver> driver;
  GraphHandle handle = 0;
  bool destroyed = false;
  std::size_t attached = 0;
  /// Payloads whose user objects this (not yet destroyed) graph owns; the
  /// garbage collector traverses them (a payload may reference its graph).
  std::vector<PyPayload*> payloads;

  PyGraph();
  ~PyGraph();
  /// destroy() the driver graph once; payloads leave the graph's ownership.
  void destroy_once();
};

/// Graphs alive now.  Guarded by g_graphs_mu (any Python thread creates and
/// drops graphs; on a free-threaded build nothing else serializes them).
extern std::unordered_set<PyGraph*> g_live_graphs;

/// What protects a graph's state on a free-threaded build (on a GIL build the
/// GIL does, and these cost an uncontended lock):
///  * the Graph Python object's critical section (Py_BEGIN_CRITICAL_SECTION,
///    pybind11 scoped_critical_section, taken by every Graph method and by
///    tp_finalize/tp_clear) serializes the graph's own methods, so a check such
///    as "not destroyed" holds until the method returns;
///  * g_graphs_mu guards g_live_graphs and every write of a graph's
///    `destroyed`, `attached` and `payloads` (and the reads of other graphs'
///    fields in counters()); it is never held across a call into Python or
///    the driver, and tp_traverse reads without it (the collector has stopped
///    the world);
///  * the driver guards its own state (SimulatedDriver::mu_; the CUDA driver is
///    thread-safe); the queue is lock-free and drains only on the main thread.
/// Thread: any.  Blocks: for a few instructions of another holder.
/// Source: Doc/howto/free-threading-extensions.rst (CPython 3.13+).
extern std::mutex g_graphs_mu;

/// Payloads owned by live, undestroyed graphs.
std::uint64_t payloads_in_live_graphs();

/// Graphs not destroyed yet (their Python objects alive).
std::uint64_t graphs_alive();

// ---------------------------------------------------------------- blocking
/// Validate a timeout in seconds: finite, >= 0, at most one year.
/// Raises ValueError naming `what` otherwise.  The result is the nearest
/// whole nanosecond (std::llround), so a value given in whole milliseconds
/// is the one settings() gives back (configure()'s docstring states the
/// rule and its limit for whole nanoseconds); truncation would keep 2.026 s
/// as 2025999999 ns (2.026 * 1e9 is 2025999999.9999998 in a double).
/// Argument checks of the Python API (main or any thread, GIL held; no
/// blocking).  seconds_arg: an int or float (not bool), else TypeError; an
/// int too large for a double comes back as +inf, which checked_timeout
/// refuses.  int_arg: an int (not bool, not an object with only __index__), else TypeError;
/// outside [lo, hi] ValueError naming the range.  bool_arg: a bool, else
/// TypeError.  `what` names the function and parameter in the message.
double seconds_arg(py::handle v, const char* what);
long long int_arg(py::handle v, const char* what, long long lo, long long hi);
bool bool_arg(py::handle v, const char* what);
std::chrono::nanoseconds checked_timeout(double seconds, const char* what);

/// Run fn() with the GIL released.  Never re-takes the GIL once the
/// interpreter is finalizing (a daemon thread would be ended by CPython with
/// pthread_exit inside PyEval_RestoreThread, through our frames): it parks
/// the thread instead (park_forever, counted in daemon_parks).
template <class F>
decltype(auto) without_gil(F&& fn);

bool interpreter_finalizing();
[[noreturn]] void park_forever();

template <class F>
decltype(auto) without_gil(F&& fn) {
  PyThreadState* ts = PyEval_SaveThread();
  struct Restore {
    PyThreadState* ts;
    // Not noexcept(true) by accident: CPython may end a daemon thread here
    // (pthread_exit), whose forced unwind must be allowed to pass.
    ~Restore() noexcept(false) {
      if (interpreter_finalizing()) park_forever();
      PyEval_RestoreThread(ts);
    }
  } restore{ts};
  return fn();
}

// ---------------------------------------------------------------- registration
void register_api(py::module_& m);  // api_bindings.cpp
void init_host(py::module_& m);     // host.cpp: variant, queue, settings
void init_exit(py::module_& m);     // exit.cpp: exit hook, Py_AtExit backstop
void init_fork(py::module_& m);     // fork.cpp: the at-fork reset

// Simulated drivers, for the backstop and the at-fork reset (exit.cpp).
extern std::mutex g_drivers_mu;
extern std::vector<std::weak_ptr<SimulatedDriver>> g_sim_drivers;
void track_simulated_driver(const std::shared_ptr<SimulatedDriver>& d);
/// Keep `d` alive until the backstop, which releases its held destructor
/// calls from `threads` threads after finalization (test hook).
void release_at_backstop(const std::shared_ptr<SimulatedDriver>& d, int threads);

#if DC_TEST_HOOKS
// Test hooks the host calls (reference/testing/test_hooks.cpp), compiled only
// into a test build (CMake option DC_TEST_HOOKS); a production build has
// neither these symbols nor the branches that call them.
void register_test_hooks(py::module_& m);
void test_hook_in_gate(const void* queue);  // Host::in_gate
void test_hooks_at_backstop();              // release a held producer, wait for it
int test_gate_hook_passes();                // producers that went through the armed hook
void test_hooks_after_fork();               // reset the hooks' state in a fork() child
#endif

}  // namespace deferred_cleanup::host
