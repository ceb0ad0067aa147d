// host.hpp: what the three files of the CPython host share.
//
//   host.cpp          the CPython Host of each variant (Py_AddPendingCall, the
//                     main-thread test, the clock, the finalizing test), the
//                     payload and its cleanup, the exit hook (reference), the
//                     Py_AtExit backstop (every variant) and the at-fork reset;
//   api_bindings.cpp  the Python API: drivers, graphs, stats, drain_now, poll;
//   test_hooks.cpp    the `_test_` functions that hold a producer in the
//                     gate, fill CPython's pending-call ring, lose a call.
//
// The variant is chosen once, at import, from DEFERRED_CLEANUP_VARIANT; the
// queue of that variant is published and never freed.  with_queue() hands
// the one queue to a generic lambda with its static type, so every call site
// is compiled once per policy and each policy's orders stay constants.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "deferred_cleanup/callback.hpp"
#include "deferred_cleanup/driver.hpp"
#include "deferred_cleanup/policy.hpp"
#include "deferred_cleanup/queue.hpp"
#include "drivers.hpp"

namespace deferred_cleanup::host {

namespace py = pybind11;

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

/// Call f with the published queue of the variant chosen at import.
template <class F>
decltype(auto) with_queue(F&& f) {
  switch (g_variant) {
    case Variant::seed:
      return f(*g_seed);
    case Variant::cuda_core_1_2:
      return f(*g_cuda_core);
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
extern unsigned long g_main_ident;          // main thread (PyThread_get_thread_ident)
bool host_is_main_thread();
std::int64_t now_ns();                      // steady clock
extern std::atomic<bool> g_torn_down;       // the Py_AtExit backstop ran

// Host-side counters (relaxed; statistics only).
struct HostCounters {
  std::atomic<std::uint64_t> enqueued{0};             // destructor calls (pushes)
  std::atomic<std::uint64_t> enqueued_late{0};        // of those, after the door closed
  std::atomic<std::uint64_t> user_objects{0};         // user objects created (destructor due)
  std::atomic<std::uint64_t> cleanups_on_main{0};
  std::atomic<std::uint64_t> cleanups_off_main{0};
  std::atomic<std::uint64_t> destructors_on_main{0};
  std::atomic<std::uint64_t> cleanups_after_shutdown{0};
  std::atomic<std::uint64_t> host_calls_after_teardown{0};
  std::atomic<std::uint64_t> deferred_interrupts{0};  // KeyboardInterrupt/SystemExit re-raised
  std::atomic<std::uint64_t> interrupts_unraisable{0};  // later ones of a drain: sys.unraisablehook
  std::atomic<std::uint64_t> forks_in_pending_call{0};  // child forked while main ran our pending call
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
  PyObject* obj = nullptr;        // strong reference
  PyObject* finalizer = nullptr;  // strong reference or nullptr
  unsigned long destructor_thread = 0;  // written by the destructor before the push
};

/// Create a payload (main thread, GIL held).
PyPayload* new_payload(py::handle obj, py::handle finalizer);

/// Release a payload whose user object was never created: on the main
/// thread directly; off the main thread through the queue, so the cleanup
/// still runs on the main thread.
void release_uncreated(PyPayload* p);

/// The entry-point step of the chosen variant; raises a KeyboardInterrupt or
/// SystemExit that a cleanup raised (after the drain finished).
void entry();

/// Raise the KeyboardInterrupt/SystemExit a cleanup raised, if any.
void raise_deferred_interrupt();

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

/// The counters as a dict.
py::dict counters();

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

/// Graphs alive now (main thread, GIL held).
extern std::unordered_set<PyGraph*> g_live_graphs;

/// Payloads owned by live, undestroyed graphs.
std::uint64_t payloads_in_live_graphs();

/// Graphs not destroyed yet (their Python objects alive).
std::uint64_t graphs_alive();

// ---------------------------------------------------------------- blocking
/// Validate a timeout in seconds: finite, >= 0, at most one year.
/// Raises ValueError naming `what` otherwise.
/// Argument checks of the Python API (main or any thread, GIL held; no
/// blocking).  seconds_arg: an int or float (not bool), else TypeError; an
/// int too large for a double comes back as +inf, which checked_timeout
/// refuses.  int_arg: an int (or __index__, not bool), else TypeError;
/// outside [lo, hi] ValueError naming the range.  bool_arg: a bool, else
/// TypeError.  `what` names the function and parameter in the message.
double seconds_arg(py::handle v, const char* what);
long long int_arg(py::handle v, const char* what, long long lo, long long hi);
bool bool_arg(py::handle v, const char* what);
std::chrono::nanoseconds checked_timeout(double seconds, const char* what);

/// Run fn() with the GIL released.  Never re-takes the GIL once the
/// interpreter is finalizing (a daemon thread would be ended by CPython with
/// pthread_exit inside PyEval_RestoreThread, through our frames): it parks
/// the thread instead.
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
void register_api(py::module_& m);         // api_bindings.cpp
void register_test_hooks(py::module_& m);  // test_hooks.cpp
void init_host(py::module_& m);            // host.cpp: variant, queue, exit hooks

// Simulated drivers, for the backstop and the at-fork reset (host.cpp).
void track_simulated_driver(const std::shared_ptr<SimulatedDriver>& d);
/// Keep `d` alive until the backstop, which releases its held destructor
/// calls from `threads` threads after finalization (test hook).
void release_at_backstop(const std::shared_ptr<SimulatedDriver>& d, int threads);

// Test hooks the host calls (test_hooks.cpp).
void test_hook_in_gate(const void* queue);   // Host::in_gate
bool test_hook_lose_call();                  // true: pretend the call was accepted, drop it
void test_hooks_at_backstop();               // release a held producer, wait for it
int test_gate_hook_passes();                 // producers that went through the armed hook
void test_hooks_after_fork();                // reset the hooks' state in a fork() child

}  // namespace deferred_cleanup::host
