// SPDX-License-Identifier: Apache-2.0
// host.cpp: the CPython host of the queue, for each of the three variants,
// for as long as the interpreter lives.
//
// This is where the core (include/deferred_cleanup/) meets
// CPython.  It gives the core its Host: Py_AddPendingCall (through the
// pending-call trampoline below), a main-thread test, a clock for the re-arm
// rule, and (for the comparison variants) the finalizing test cuda-core 1.2.0
// uses.  It owns the payload (a Python object plus an optional finalizer,
// behind a DeferredCleanupItem) and its cleanup, the graphs, the entry-point
// step, the counters and configure().  What happens at exit is in exit.cpp
// (the exit sequence, the Py_AtExit backstop and its report), what happens in
// a fork() child in fork.cpp.
//
// Cleanups that raise KeyboardInterrupt or SystemExit (Ctrl-C during a long
// drain, sys.exit() in a finalizer) are not swallowed: the first one is kept,
// the drain stops early (host_stop_drain; the rest goes back on the queue
// with a pending call re-armed and still runs exactly once), and it is raised
// where the outermost drain was entered (the pending call returns -1 with it
// set, so CPython raises it in the interrupted code; an entry point raises
// it; in CPython's exit-time flush, with no frame, the exit hook does).  A
// pending call or entry point that runs inside a cleanup delivers nothing:
// raising there would hand the exception to that cleanup, or to a hook that
// drops it.  Later ones of the same drain go to sys.unraisablehook
// (interrupts_unraisable); other exceptions too.  The rule itself is the host
// library's (src/cpython/interrupt.hpp), which both hosts share.
#include "host.hpp"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // destructor_threads() returns a std::vector
#include <pthread.h>

#include <cmath>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

#include "deferred_cleanup/drain.hpp"
#include "deferred_cleanup/scheduling.hpp"

namespace deferred_cleanup::host {

// Py_AddPendingCall, or inside a PEP 788 guard when built so (host_pep788.cpp).
int guarded_add_pending_call(int (*fn)(void*), void* arg);

Variant g_variant = Variant::reference;
ReferenceQueue* g_reference = nullptr;
SeedQueue* g_seed = nullptr;
CudaCore12Queue* g_cuda_core = nullptr;
CudaCore12FixedQueue* g_cuda_core_fixed = nullptr;
unsigned long g_main_ident = 0;
std::atomic<bool> g_torn_down{false};
HostCounters g_counters;
std::unordered_set<PyGraph*> g_live_graphs;

// ---------------------------------------------------------------- host functions

// Producers inside Py_AddPendingCall right now (any variant), so the
// backstop can wait for a producer it released in a test.  seq_cst: the
// backstop's read after setting g_torn_down must see an increment made
// before the producer read g_torn_down (store buffering, as in the gate).
std::atomic<std::uint32_t> g_in_host{0};

// When the last finalizing check was made (cuda-core-1.2 and seed drains),
// and the widest check-to-call interval seen: the window in which a call
// can still reach CPython after finalization began.  Statistics only.
std::atomic<std::int64_t> g_check_to_call_max{0};

// Whether the main thread is inside one of our pending calls now (main
// thread only).  A child forked by another thread meanwhile inherits
// CPython's "a thread is handling pending calls" state and, on the versions
// where that state is a flag that nothing resets after fork, never runs a
// pending call again (measured on 3.10-3.15 by tests/test_fork.py; docs Caveats, fork()).
bool g_in_pending_call = false;

// The exit sequence is draining (exit.cpp; main thread only): no early stop.
bool g_exit_sequence_running = false;

namespace {

std::atomic<std::int64_t> g_last_check_ns{0};  // see g_check_to_call_max
PendingCallFn g_core_pending_call = nullptr;   // the variant's pending_call<P>, set at import

int host_trampoline(void* arg) {
  note_finalizing();  // step 4 of the reference's shutdown, if CPython is finalizing now
  const bool outer = g_in_pending_call;  // a cleanup may run a nested pending call
  g_in_pending_call = true;
  const int rc = g_core_pending_call(arg);
  g_in_pending_call = outer;
  return rc;
}

int host_add_pending_call(PendingCallFn fn, void* arg) {
  (void)
      fn;  // always the variant's pending_call<P> (g_core_pending_call), called by host_trampoline
  // Announces us to the backstop's wait (seq_cst; see g_in_host).
  deferred_cleanup::cpython::detail::enter_host_call(g_in_host);
  // Written once by the backstop (seq_cst).
  if (g_torn_down.load(std::memory_order_seq_cst)) {
    // Statistics only: a call into CPython after teardown (the hazard).
    g_counters.host_calls_after_teardown.fetch_add(1, std::memory_order_relaxed);
  }
  if (g_variant == Variant::cuda_core_1_2 || g_variant == Variant::cuda_core_1_2_fixed) {
    const std::int64_t d =
        now_ns() - g_last_check_ns.load(std::memory_order_relaxed);        // statistics
    std::int64_t m = g_check_to_call_max.load(std::memory_order_relaxed);  // statistics
    while (d > m && !g_check_to_call_max.compare_exchange_weak(m, d, std::memory_order_relaxed)) {
    }
  }
  const int rc = guarded_add_pending_call(&host_trampoline, arg);  // host_pep788.cpp
  // Read by the backstop's wait.
  deferred_cleanup::cpython::detail::leave_host_call(g_in_host);
  return rc;
}

// cuda-core 1.2.0's test, as shipped: `!Py_IsInitialized() || finalizing`.
bool host_finalizing() {
  g_last_check_ns.store(now_ns(), std::memory_order_relaxed);  // statistics only
  return !Py_IsInitialized() || finalizing_now();
}

// ---------------------------------------------------------------- deferred interrupts

// The interrupt rule, the host library's (src/cpython/interrupt.hpp), counted
// into this module's counters (interrupts_unraisable counts only the later
// interrupts of a drain, not every unraisable error).
using deferred_cleanup::cpython::detail::InterruptCounters;
using deferred_cleanup::cpython::detail::InterruptRule;

InterruptCounters make_interrupt_counters() {
  InterruptCounters c;
  c.delivered = &g_counters.deferred_interrupts;
  c.later_interrupts = &g_counters.interrupts_unraisable;
  c.held_at_flush = &g_counters.interrupts_held_at_flush;
  return c;
}
InterruptRule g_interrupts{make_interrupt_counters()};

/// Host::after_drain: the rule's (main thread, GIL held).
int host_after_drain() { return g_interrupts.after_drain(); }

/// Host::stop_drain: the rule's; the exit sequence never stops early (main
/// thread, GIL held).
bool host_stop_drain() { return g_interrupts.stop_drain(g_exit_sequence_running); }

/// Save and restore the current exception around a cleanup, so a drain run
/// from a pending call or an entry point never clobbers or leaks one.
struct SavedError {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  SavedError() { PyErr_Fetch(&type, &value, &tb); }
  ~SavedError() { PyErr_Restore(type, value, tb); }
};

std::set<unsigned long>
    g_destructor_threads;  // main thread only (GIL): distinct destructor threads

/// The cleanup: main thread, GIL held (pending call or entry point).  Calls
/// the finalizer with the object, drops both references.  Nothing escapes.
void py_cleanup(void* arg) noexcept {
  auto* p = static_cast<PyPayload*>(arg);
  const unsigned long me = PyThread_get_thread_ident();
  // Statistics only (relaxed): none of these counters orders anything.
  (me == g_main_ident ? g_counters.cleanups_on_main : g_counters.cleanups_off_main)
      .fetch_add(1, std::memory_order_relaxed);
  if (p->destructor_thread != 0 && p->destructor_thread == g_main_ident)
    g_counters.destructors_on_main.fetch_add(1, std::memory_order_relaxed);  // statistics only
  // A cleanup once CPython is finalizing would touch a dying interpreter:
  // counted, never expected (the host is marked dead when it sees the flag).
  if (finalizing_now())
    g_counters.cleanups_after_shutdown.fetch_add(1, std::memory_order_relaxed);  // statistics only
  if (p->destructor_thread != 0) {
    try {
      g_destructor_threads.insert(p->destructor_thread);
    } catch (...) {
      // Out of memory while recording a statistic: skip the statistic.
    }
  }
  g_interrupts.begin_cleanup();  // main thread, GIL held
  {
    SavedError saved;
    if (p->finalizer != nullptr) {
      PyObject* r = PyObject_CallOneArg(p->finalizer, p->obj);
      if (r == nullptr) {
        g_interrupts.report(p->finalizer);  // kept or reported; host_stop_drain decides
      } else {
        Py_DECREF(r);
      }
    }
    Py_DECREF(p->obj);  // may run __del__; CPython reports its errors itself
    Py_XDECREF(p->finalizer);
    if (PyErr_Occurred()) g_interrupts.report(nullptr);
  }
  g_interrupts.end_cleanup();
  delete p;
  g_counters.last_cleanup_ns.store(now_ns(), std::memory_order_relaxed);  // statistics only
}

/// The user-object destructor handed to the driver: runs on a driver thread
/// with no thread state.  Records its thread (plain store, published by the
/// push) and does what callback.hpp allows.
template <class P>
void binding_destructor(void* arg) {
  auto* p = static_cast<PyPayload*>(arg);
  const auto self = static_cast<unsigned long>(pthread_self());
  p->destructor_thread = self;
  g_counters.last_destructor_thread.store(self, std::memory_order_relaxed);  // report only
  g_counters.enqueued.fetch_add(1, std::memory_order_relaxed);               // statistics only
  if (g_counters.shutdown_done.load(std::memory_order_relaxed))
    g_counters.enqueued_late.fetch_add(1, std::memory_order_relaxed);  // statistics only
  user_object_destructor<P>(&p->item);
}

}  // namespace

// The gate hook holds a producer in the window: test builds only.
#if DC_TEST_HOOKS
constexpr void (*kInGate)(const void*) = &test_hook_in_gate;
#else
constexpr void (*kInGate)(const void*) = nullptr;
#endif

Host g_host{
    .add_pending_call = &host_add_pending_call,
    .is_main_thread = &host_is_main_thread,
    .in_gate = kInGate,
    .now_ns = &now_ns,
    .finalizing = &host_finalizing,
    .after_drain = &host_after_drain,
    .stop_drain = &host_stop_drain,
};

std::uint64_t destructors_due() {
  // Statistics snapshot (relaxed): user objects whose destructor has not run,
  // less those a live graph still owns.
  const std::uint64_t created = g_counters.user_objects.load(std::memory_order_relaxed);
  const std::uint64_t ran = g_counters.enqueued.load(std::memory_order_relaxed);
  const std::uint64_t live = payloads_in_live_graphs();
  return created > ran + live ? created - ran - live : 0;
}

// ---------------------------------------------------------------- shared functions

bool host_is_main_thread() { return PyThread_get_thread_ident() == g_main_ident; }

std::int64_t now_ns() {
  const auto t = std::chrono::steady_clock::now().time_since_epoch();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t).count();
}

bool interpreter_finalizing() { return !Py_IsInitialized() || finalizing_now(); }

void park_forever() {
  g_counters.daemon_parks.fetch_add(1, std::memory_order_relaxed);  // statistics only
  for (;;) std::this_thread::sleep_for(std::chrono::hours(24));
}

Stats& stats() {
  return with_queue([](auto& q) -> Stats& { return q.stats; });
}

DestructorFn destructor_fn() {
  return with_queue([](auto& q) -> DestructorFn {
    using P = typename std::remove_reference_t<decltype(q)>::Policy;
    return &binding_destructor<P>;
  });
}

/// Python type name of v, for an error message.
std::string type_name(py::handle v) { return Py_TYPE(v.ptr())->tp_name; }

double seconds_arg(py::handle v, const char* what) {
  // bool is an int subclass, but True seconds is a mistake: refused.
  if (PyBool_Check(v.ptr()) || !(PyLong_Check(v.ptr()) || PyFloat_Check(v.ptr())))
    throw py::type_error(std::string(what) + ": must be a number of seconds (int or float), not " +
                         type_name(v));
  const double d = PyFloat_Check(v.ptr()) ? PyFloat_AS_DOUBLE(v.ptr()) : PyLong_AsDouble(v.ptr());
  if (d == -1.0 && PyErr_Occurred()) {  // an int too large for a double (OverflowError)
    PyErr_Clear();
    return HUGE_VAL;  // refused by checked_timeout with the range
  }
  return d;
}

long long int_arg(py::handle v, const char* what, long long lo, long long hi) {
  // An int (or int subclass), never bool and never a mere __index__ object:
  // the same types seconds_arg and reference_burst accept as an int.
  if (PyBool_Check(v.ptr()) || !PyLong_Check(v.ptr()))
    throw py::type_error(std::string(what) + ": must be an int, not " + type_name(v));
  int overflow = 0;
  const long long n = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (n == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow != 0 || n < lo || n > hi)
    throw py::value_error(std::string(what) + ": must be from " + std::to_string(lo) + " to " +
                          std::to_string(hi));
  return n;
}

bool bool_arg(py::handle v, const char* what) {
  if (!PyBool_Check(v.ptr()))
    throw py::type_error(std::string(what) + ": must be a bool, not " + type_name(v));
  return v.ptr() == Py_True;
}

std::chrono::nanoseconds checked_timeout(double seconds, const char* what) {
  constexpr double kMax = 365.0 * 24 * 3600;
  if (!std::isfinite(seconds) || seconds < 0.0 || seconds > kMax) {
    throw py::value_error(std::string(what) +
                          ": timeout must be a finite number of seconds from 0 to " +
                          std::to_string(static_cast<long long>(kMax)) + " (one year)");
  }
  // The nearest whole nanosecond, never the truncation (host.hpp says why).
  return std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(seconds * 1e9)));
}

PyPayload* new_payload(py::handle obj, py::handle finalizer) {
  auto* p = new PyPayload;
  p->obj = obj.inc_ref().ptr();
  p->finalizer = finalizer.is_none() ? nullptr : finalizer.inc_ref().ptr();
  init_item(p->item, p, &py_cleanup);
  stats().created.fetch_add(1, std::memory_order_relaxed);  // statistics only
  return p;
}

void release_uncreated(PyPayload* p) {
  with_queue([p](auto& q) {
    if (host_is_main_thread()) {
      cleanup_directly(q, &p->item);
    } else {
      // Off the main thread: hand it to the main thread as a destructor would.
      g_counters.enqueued.fetch_add(1, std::memory_order_relaxed);      // statistics only
      g_counters.user_objects.fetch_add(1, std::memory_order_relaxed);  // it is now "due"
      q.stats.direct_cleanups.fetch_add(1, std::memory_order_relaxed);  // statistics only
      on_user_object_destroyed(q, &p->item);
    }
  });
  if (host_is_main_thread()) raise_deferred_interrupt();
}

cpython::detail::InterruptRule& host_interrupts() { return g_interrupts; }

void raise_deferred_interrupt() {
  // The rule's delivery (nothing inside a cleanup; counted there).
  if (g_interrupts.deliver() != 0) throw py::error_already_set();
}

void entry() {
  note_finalizing();
  with_queue([](auto& q) { drain_at_entry(q); });
  if (host_is_main_thread()) raise_deferred_interrupt();
}

bool shut_down() {
  return with_queue([](auto& q) { return !q.host_alive() || !q.accepting(); }) ||
         g_counters.shutdown_done.load(std::memory_order_relaxed);
}

std::mutex g_graphs_mu;

std::uint64_t payloads_in_live_graphs() {
  std::lock_guard<std::mutex> lk(g_graphs_mu);
  std::uint64_t n = 0;
  for (const PyGraph* g : g_live_graphs)
    if (!g->destroyed) n += g->payloads.size();
  return n;
}

std::uint64_t graphs_alive() {
  std::lock_guard<std::mutex> lk(g_graphs_mu);
  std::uint64_t n = 0;
  for (const PyGraph* g : g_live_graphs) n += g->destroyed ? 0 : 1;
  return n;
}

PyGraph::PyGraph() {
  std::lock_guard<std::mutex> lk(g_graphs_mu);
  g_live_graphs.insert(this);
}

PyGraph::~PyGraph() {
  {
    std::lock_guard<std::mutex> lk(g_graphs_mu);
    g_live_graphs.erase(this);
  }
  if (!destroyed) {
    try {
      destroy_once();
    } catch (...) {
      // A graph object that dies undestroyed releases what it can; errors
      // here have nobody to go to.
    }
    SavedError saved;      // a dealloc must leave the error state alone
    release_after_exit();  // dropped by an exit handler after the exit sequence
  }
}

void PyGraph::destroy_once() {
  {
    std::lock_guard<std::mutex> lk(g_graphs_mu);  // not held across the driver call
    if (destroyed) return;
    destroyed = true;  // even if the driver fails, never destroy twice
    payloads.clear();  // the driver's destructors own them from here on
  }
  driver->destroy(handle);
}

py::dict counters() {
  note_finalizing();
  py::dict d;
  with_queue([&d](auto& q) {
    const Stats& s = q.stats;
    // statistics only: relaxed snapshot, synchronizes with nothing
    auto r = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    d["variant"] = variant_name(q.variant());
    d["created"] = r(s.created);
    d["cleaned"] = r(s.cleaned);
    d["direct_cleanups"] = r(s.direct_cleanups);
    d["schedule_attempts"] = r(s.schedule_attempts);
    d["schedule_failures"] = r(s.schedule_failures);
    d["pending_calls"] = r(s.pending_calls);
    d["drain_cycles"] = r(s.drain_cycles);
    d["pending_calls_ignored"] = r(s.pending_calls_ignored);
    d["direct_drains"] = r(s.direct_drains);
    d["retries"] = r(s.retries);
    d["rearms"] = r(s.rearms);
    d["main_rearms"] = r(s.main_rearms);
    d["leaked_at_shutdown"] = r(s.leaked_at_shutdown);
    d["leaked_finalizing"] = r(s.leaked_finalizing);
    d["gate_timeouts"] = r(s.gate_timeouts);
    d["forks"] = r(s.forks);
    const HostCounters& c = g_counters;
    d["enqueued"] = r(c.enqueued);
    d["enqueued_late"] = r(c.enqueued_late);
    d["user_objects"] = r(c.user_objects);
    d["cleanups_on_main"] = r(c.cleanups_on_main);
    d["cleanups_off_main"] = r(c.cleanups_off_main);
    d["destructors_on_main"] = r(c.destructors_on_main);
    d["cleanups_after_shutdown"] = r(c.cleanups_after_shutdown);
    d["host_calls_after_teardown"] = r(c.host_calls_after_teardown);
    d["deferred_interrupts"] = r(c.deferred_interrupts);
    d["interrupts_unraisable"] = r(c.interrupts_unraisable);
    d["interrupts_held_at_flush"] = r(c.interrupts_held_at_flush);
    d["daemon_parks"] = r(c.daemon_parks);
    d["forks_in_pending_call"] = r(c.forks_in_pending_call);
    d["atexit_table_full"] = g_atexit_rc != 0;
    d["last_destructor_thread"] = c.last_destructor_thread.load(std::memory_order_relaxed);
    d["main_thread"] = g_main_ident;
    d["queue_empty"] = q.empty_snapshot();
    d["scheduled"] = q.scheduled_snapshot();
    d["accepting"] = q.accepting();
    d["host_alive"] = q.host_alive();
    d["destructors_due"] = destructors_due();
    d["graphs_alive"] = graphs_alive();
    d["payloads_in_live_graphs"] = payloads_in_live_graphs();
    using P = typename std::remove_reference_t<decltype(q)>::Policy;
    if constexpr (P::gate) {
      d["in_flight"] = q.in_flight();
      d["calls_outstanding"] = calls_outstanding(q);
    } else {
      d["in_flight"] = 0;
      d["calls_outstanding"] = 0;
    }
  });
  return d;
}

std::size_t drain_now() {
  note_finalizing();
  const DrainNowResult r = with_queue([](auto& q) { return deferred_cleanup::drain_now(q); });
  switch (r.status) {
    case DrainNowStatus::not_main_thread:
      throw NotMainThreadError("drain_now() may only be called on the main thread");
    case DrainNowStatus::host_dead:
      throw ShutdownError("deferred_cleanup has shut down: nothing is drained any more");
    case DrainNowStatus::nested:
    case DrainNowStatus::drained:
      break;
  }
  raise_deferred_interrupt();
  return r.cleaned;
}

// ---------------------------------------------------------------- settings

namespace {

/// The queue's settings (host.hpp, Settings): where configure() writes and
/// settings() reads, in every variant.
Settings& the_settings() {
  return with_queue([](auto& q) -> Settings& { return q.settings; });
}

void configure(py::object exit_wait_s, py::object stale_claim_s, py::object backstop_wait_s) {
  Settings& s = the_settings();
  if (!exit_wait_s.is_none()) {
    const char* what = "configure(exit_wait_s)";
    const auto ns = checked_timeout(seconds_arg(exit_wait_s, what), what);
    s.exit_wait_ns.store(ns.count(), std::memory_order_relaxed);  // a setting
  }
  if (!stale_claim_s.is_none()) {
    const char* what = "configure(stale_claim_s)";
    const double seconds = seconds_arg(stale_claim_s, what);
    const auto ns = checked_timeout(seconds, what);
    // Kept in whole nanoseconds: a value below one (9e-10 and 1e-300 included)
    // is refused, though the nearest whole nanosecond of 9e-10 is one.
    if (seconds < 1e-9 || ns.count() <= 0)
      throw py::value_error(
          "configure(stale_claim_s): must be at least 1e-09 seconds (one nanosecond, the unit it "
          "is kept in)");
    s.stale_claim_ns.store(ns.count(), std::memory_order_relaxed);  // a setting
  }
  if (!backstop_wait_s.is_none()) {
    const char* what = "configure(backstop_wait_s)";
    const auto ns = checked_timeout(seconds_arg(backstop_wait_s, what), what);
    s.backstop_wait_ns.store(ns.count(), std::memory_order_relaxed);  // a setting
  }
}

py::dict settings() {
  const Settings& s = the_settings();
  py::dict d;
  d["exit_wait_s"] = s.exit_wait_ns.load(std::memory_order_relaxed) / 1e9;          // a setting
  d["stale_claim_s"] = s.stale_claim_ns.load(std::memory_order_relaxed) / 1e9;      // a setting
  d["backstop_wait_s"] = s.backstop_wait_ns.load(std::memory_order_relaxed) / 1e9;  // a setting
  return d;
}

}  // namespace

void init_host(py::module_& m) {
  const char* v = std::getenv("DEFERRED_CLEANUP_VARIANT");
  std::string name = (v != nullptr && v[0] != '\0') ? v : "reference";
  if (name == ReferencePolicy::name) {
    g_variant = Variant::reference;
    g_reference = publish_queue(new ReferenceQueue(&g_host));  // never freed
  } else if (name == SeedPolicy::name) {
    g_variant = Variant::seed;
    g_seed = publish_queue(new SeedQueue(&g_host));  // never freed
  } else if (name == CudaCore12Policy::name) {
    g_variant = Variant::cuda_core_1_2;
    g_cuda_core = publish_queue(new CudaCore12Queue(&g_host));  // never freed
  } else if (name == CudaCore12FixedPolicy::name) {
    g_variant = Variant::cuda_core_1_2_fixed;
    g_cuda_core_fixed = publish_queue(new CudaCore12FixedQueue(&g_host));  // never freed
  } else {
    throw py::value_error(
        "DEFERRED_CLEANUP_VARIANT must be one of 'reference', 'seed', 'cuda-core-1.2', "
        "'cuda-core-1.2-fixed', not '" +
        name + "'");
  }
  g_core_pending_call = with_queue([](auto& q) -> PendingCallFn {
    using P = typename std::remove_reference_t<decltype(q)>::Policy;
    return &pending_call<P>;
  });
  g_main_ident =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();

  m.def(
      "variant", [] { return std::string(variant_name(g_variant)); },
      "variant() -> str\n\nThe variant fixed at import: 'reference', 'seed', 'cuda-core-1.2' or "
      "'cuda-core-1.2-fixed'.");
  m.def("configure", &configure, py::arg("exit_wait_s") = py::none(),
        py::arg("stale_claim_s") = py::none(), py::arg("backstop_wait_s") = py::none(),
        "configure(exit_wait_s: float | None = None, stale_claim_s: float | None = None, "
        "backstop_wait_s: float | None = None) -> None");
  m.def("settings", &settings, "settings() -> dict");
  m.def(
      "last_cleanup_ns", [] { return g_counters.last_cleanup_ns.load(std::memory_order_relaxed); },
      "last_cleanup_ns() -> int\n\nsteady_clock time (ns) of the last cleanup, 0 if none.");
  m.def("now_ns", &now_ns,
        "now_ns() -> int\n\nsteady_clock time in ns (the clock of last_cleanup_ns).");
  m.def(
      "destructor_threads",
      [] {
        return std::vector<unsigned long>(g_destructor_threads.begin(), g_destructor_threads.end());
      },
      "destructor_threads() -> list[int]\n\nDistinct pthread ids of the threads that ran the "
      "destructors of "
      "cleaned payloads (since the last reset).");
  m.def(
      "_test_reset_destructor_threads", [] { g_destructor_threads.clear(); },
      "_test_reset_destructor_threads() -> None\n\nForget the recorded destructor threads.");
}

}  // namespace deferred_cleanup::host
