// SPDX-License-Identifier: Apache-2.0
// deferred_cleanup._native.probe: measurements of CPython's pending-call
// machinery, taken from a foreign thread.
//
// A "foreign thread" here is a plain std::thread that never calls
// PyGILState_Ensure and so has no thread state, exactly like the driver thread
// on which CUDA runs a user object's destructor.  From such a thread the only
// CPython entry point this file uses is Py_AddPendingCall, which CPython
// documents as callable without the GIL (Doc/c-api/init.rst, "Asynchronous
// Notifications").  Everything else runs on the main thread with the GIL held,
// because pybind11 calls into this file with it held.
//
// The probe is split in small steps that Python orchestrates
// (deferred_cleanup/probe.py): a step here queues calls or fills the queue,
// then returns to Python so that the eval loop, not this file, decides when
// the calls run.  That is the point of the measurement: whether the eval
// breaker notices a pending call added by a thread with no thread state
// (gh-95820 on 3.10-3.12) is only visible while real bytecode runs.
//
// Every pending call carries a pointer to a Slot in one static array that is
// never freed or reused.  A call that runs late (after its probe gave up and
// moved on, the "starved" case) therefore still writes into valid memory, and
// the probe that owns the slot can tell that it ran late.
//
// Nothing here may hang: every wait is bounded, and a foreign thread either
// finishes its fixed amount of work or is joined before the step returns.
#include <pybind11/pybind11.h>

#include <Python.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace py = pybind11;

namespace {

using Clock = std::chrono::steady_clock;

/// Milliseconds on the steady clock since the module was loaded.
/// Thread: any.  Blocks: no.  Memory ordering: none (reads a clock).
/// Errors: none.  Source: C++20 <chrono>.
const Clock::time_point g_epoch = Clock::now();
double now_ms() {
  return std::chrono::duration<double, std::milli>(Clock::now() - g_epoch).count();
}

/// What one pending call records about itself.
///
/// Fields written by a foreign thread (added, add_rc, add_ms) are published
/// through `added` (release) and read after an acquire load of it or after
/// the foreign thread was joined.  Fields written by the pending call itself
/// run on the thread that holds the GIL and are published through `ran`
/// (release) for readers on any thread.
struct Slot {
  std::atomic<int> added{0};  // 1 once the foreign thread's Py_AddPendingCall returned
  std::atomic<int> ran{0};    // 1 once the pending call ran
  int add_rc = 0;             // Py_AddPendingCall's return value
  double add_ms = 0;          // when Py_AddPendingCall returned
  double ran_ms = 0;          // when the call ran
  unsigned long thread = 0;   // PyThread_get_thread_ident() of the thread that ran it
  std::int64_t interp = -1;   // PyInterpreterState_GetID of the interpreter that ran it
  std::uint64_t step = 0;     // g_step when it ran (which eval-breaker check)
  std::uint64_t seq = 0;      // global run order
  int fail = 0;               // 1: set RuntimeError and return -1
  int exc_set = 0;            // PyErr_Occurred() was true when the call started
};

constexpr std::size_t kSlots = 16384;
std::array<Slot, kSlots> g_slots;
// Next free slot.  Only the main thread (GIL held) allocates, so relaxed is
// enough: the GIL already orders allocations; the atomic only documents that
// the value is shared with nobody else.
std::atomic<std::size_t> g_next_slot{0};
// Step counter bumped by Python's step() between bytecodes; read by pending
// calls, which run on the thread holding the GIL, so relaxed suffices (the GIL
// orders both sides).
std::atomic<std::uint64_t> g_step{0};
// Global run order; written only under the GIL (relaxed, ordered by the GIL).
std::atomic<std::uint64_t> g_seq{0};

std::size_t alloc_slots(std::size_t n) {
  // Relaxed: main-thread-only allocation, ordered by the GIL (see above).
  std::size_t base = g_next_slot.fetch_add(n, std::memory_order_relaxed);
  if (base + n > kSlots) throw std::runtime_error("probe: out of slots");
  return base;
}

/// The pending call the probe queues.  Records who ran it, when, at which
/// step, in which order; with `fail` set it raises RuntimeError and returns -1.
/// Thread: whatever thread CPython chooses to run pending calls on (the
/// measured fact); it holds the GIL.  Blocks: no.
/// Memory ordering: publishes the record with a release store of `ran`,
/// matched by acquire loads in ran()/slot().
/// Errors: returns -1 with RuntimeError set when the slot says so.
/// Source: Include/ceval.h Py_AddPendingCall (func returns 0 or -1 with an
/// exception set), all of 3.10-3.15.
int record_call(void* arg) {
  auto* s = static_cast<Slot*>(arg);
  s->ran_ms = now_ms();
  // An earlier call's exception still set means CPython went on calling after
  // a failure within the same pass over the queue.
  s->exc_set = PyErr_Occurred() != nullptr;
  s->thread = PyThread_get_thread_ident();
  s->interp = PyInterpreterState_GetID(PyInterpreterState_Get());
  // Relaxed: g_step/g_seq are only touched under the GIL, which orders them.
  s->step = g_step.load(std::memory_order_relaxed);
  s->seq = g_seq.fetch_add(1, std::memory_order_relaxed);
  // Release: pairs with the acquire in ran()/slot() so that a reader that
  // sees ran==1 also sees the fields above.
  s->ran.store(1, std::memory_order_release);
  if (s->fail) {
    PyErr_SetString(PyExc_RuntimeError, "deferred_cleanup probe: pending call failed on purpose");
    return -1;
  }
  return 0;
}

// Foreign threads started by start_foreign_add; joined by join_foreign().
// Allocated once and never destroyed: a thread the caller never joined must
// not make the vector's destructor (at exit, after finalization) call
// std::terminate on a joinable std::thread.
std::mutex g_threads_mu;
std::vector<std::thread>& g_threads = *new std::vector<std::thread>;

/// Run `fn` on a new foreign thread and wait for it (the caller keeps the GIL:
/// the foreign thread never needs it).
template <class F>
void on_foreign_thread(F&& fn) {
  std::thread t(std::forward<F>(fn));
  t.join();
}

// ------------------------------------------------------------ capacity / full
/// Fill the pending-call queue from a foreign thread while the main thread
/// holds the GIL inside this function, so nothing can run the calls.
/// Thread: main, GIL held.  Blocks: on joining the foreign thread (bounded:
/// at most `limit` adds).  Memory ordering: join() makes the foreign thread's
/// writes visible.  Errors: none raised; reports what it saw.
/// Source: Python/ceval.c _push_pending_call (3.10, 3.11), Python/ceval_gil.c
/// _push_pending_call (3.12-3.15).
py::dict fill_from_foreign(int limit) {
  std::size_t base = alloc_slots(static_cast<std::size_t>(limit) + 2);
  int accepted = 0, fail_rc = 0, second_rc = 0;
  on_foreign_thread([&] {
    for (int i = 0; i < limit; ++i) {
      int rc = Py_AddPendingCall(record_call, &g_slots[base + i]);
      if (rc != 0) {
        fail_rc = rc;
        // The refused item's slot index is base+i; try once more to see that
        // refusal is stable (nothing was evicted to make room).
        second_rc = Py_AddPendingCall(record_call, &g_slots[base + limit]);
        return;
      }
      ++accepted;
    }
  });
  const bool exc_after_foreign = PyErr_Occurred() != nullptr;
  // The same add from the main thread, which has a thread state: does a
  // refusal set an exception there?
  int main_rc = Py_AddPendingCall(record_call, &g_slots[base + limit + 1]);
  const bool exc_after_main = PyErr_Occurred() != nullptr;
  if (exc_after_main || exc_after_foreign) PyErr_Clear();
  py::dict d;
  d["base"] = base;
  d["limit"] = limit;
  d["accepted"] = accepted;
  d["fail_rc"] = fail_rc;
  d["second_rc"] = second_rc;
  d["main_rc"] = main_rc;
  d["exc_after_foreign"] = exc_after_foreign;
  d["exc_after_main"] = exc_after_main;
  return d;
}

/// Queue `n_foreign` calls from a foreign thread, then `n_main` from the main
/// thread (which, having a thread state, also signals the eval breaker on
/// 3.10-3.12).  The first `n_fail` foreign calls raise.  Returns the base
/// slot index; slot order is foreign calls then main calls.
/// Thread: main, GIL held.  Blocks: joins the foreign thread (bounded).
/// Memory ordering: join().  Errors: RuntimeError if an add is refused.
/// Source: Python/ceval_gil.c Py_AddPendingCall (3.12-3.15), Python/ceval.c (3.10, 3.11).
py::dict queue_calls(int n_foreign, int n_main, int n_fail) {
  std::size_t base = alloc_slots(static_cast<std::size_t>(n_foreign + n_main));
  for (int i = 0; i < n_fail && i < n_foreign; ++i) g_slots[base + i].fail = 1;
  int refused = 0;
  on_foreign_thread([&] {
    for (int i = 0; i < n_foreign; ++i)
      if (Py_AddPendingCall(record_call, &g_slots[base + i]) != 0) ++refused;
  });
  for (int i = 0; i < n_main; ++i)
    if (Py_AddPendingCall(record_call, &g_slots[base + n_foreign + i]) != 0) ++refused;
  py::dict d;
  d["base"] = base;
  d["n"] = n_foreign + n_main;
  d["refused"] = refused;
  return d;
}

// ------------------------------------------------------------ delays
/// Start a foreign thread that sleeps `delay_ms`, then adds one pending call.
/// Returns the slot index at once; the caller polls ran(i) / slot(i) and
/// finally calls join_foreign().
/// Thread: main.  Blocks: no.  Memory ordering: the foreign thread publishes
/// add_rc/add_ms with a release store of `added`, read by acquire in slot().
/// Errors: none.  Source: Python/ceval_gil.c Py_AddPendingCall (3.12-3.15).
std::size_t start_foreign_add(double delay_ms) {
  std::size_t i = alloc_slots(1);
  Slot* s = &g_slots[i];
  std::lock_guard<std::mutex> lk(g_threads_mu);
  g_threads.emplace_back([s, delay_ms] {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms));
    s->add_rc = Py_AddPendingCall(record_call, s);
    s->add_ms = now_ms();
    // Release: serialization point with the main thread's acquire in slot().
    s->added.store(1, std::memory_order_release);
  });
  return i;
}

/// Join every thread start_foreign_add started (each finishes after its
/// bounded sleep and one add).  Thread: main; releases the GIL while joining.
void join_foreign() {
  std::vector<std::thread> ts;
  {
    std::lock_guard<std::mutex> lk(g_threads_mu);
    ts.swap(g_threads);
  }
  py::gil_scoped_release nogil;
  for (auto& t : ts) t.join();
}

bool ran(std::size_t i) {
  // Acquire: pairs with the release in record_call.
  return g_slots.at(i).ran.load(std::memory_order_acquire) != 0;
}

py::dict slot(std::size_t i) {
  const Slot& s = g_slots.at(i);
  py::dict d;
  // Acquire loads: pair with the release stores in record_call and in the
  // foreign thread of start_foreign_add.
  d["added"] = s.added.load(std::memory_order_acquire) != 0;
  d["ran"] = s.ran.load(std::memory_order_acquire) != 0;
  d["add_rc"] = s.add_rc;
  d["add_ms"] = s.add_ms;
  d["ran_ms"] = s.ran_ms;
  d["thread"] = s.thread;
  d["interp"] = s.interp;
  d["step"] = s.step;
  d["seq"] = s.seq;
  d["exc_set"] = s.exc_set != 0;
  return d;
}

/// A C call that releases the GIL for `ms` milliseconds (case (c) of the
/// delay probe).  Returns (start_ms, end_ms).  Thread: any with the GIL.
/// Blocks: sleeps `ms` without the GIL.
py::tuple blocking_call(double ms) {
  double t0 = now_ms();
  {
    py::gil_scoped_release nogil;  // Py_BEGIN_ALLOW_THREADS
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  }
  return py::make_tuple(t0, now_ms());
}

// ------------------------------------------------------------ subinterpreters
/// Start a legacy subinterpreter on the main thread (Py_NewInterpreter), let a
/// foreign thread add a pending call while the subinterpreter runs `code`
/// (pure Python, bounded by the code itself), end the subinterpreter and
/// return to the main interpreter.  The caller then waits for the call.
/// Thread: main, GIL held.  Blocks: while `code` runs.
/// Errors: returns {"available": False, "why": ...} when Py_NewInterpreter
/// fails.  Source: Python/pylifecycle.c Py_NewInterpreter / Py_EndInterpreter
/// (3.10-3.15).
py::dict subinterpreter_add(const std::string& code, double add_delay_ms) {
  PyThreadState* main_ts = PyThreadState_Get();
  std::int64_t main_id = PyInterpreterState_GetID(PyThreadState_GetInterpreter(main_ts));
  PyThreadState* sub = Py_NewInterpreter();
  py::dict d;
  if (sub == nullptr) {
    PyThreadState_Swap(main_ts);
    std::string why = "Py_NewInterpreter returned NULL";
    if (PyErr_Occurred()) PyErr_Clear();
    d["available"] = false;
    d["why"] = why;
    return d;
  }
  std::int64_t sub_id = PyInterpreterState_GetID(PyThreadState_GetInterpreter(sub));
  std::size_t i = start_foreign_add(add_delay_ms);
  int run_rc = PyRun_SimpleString(code.c_str());
  bool ran_in_sub_window =
      g_slots[i].ran.load(std::memory_order_acquire) != 0;  // pairs with record_call's release
  Py_EndInterpreter(sub);
  PyThreadState_Swap(main_ts);
  d["available"] = true;
  d["slot"] = i;
  d["main_id"] = main_id;
  d["sub_id"] = sub_id;
  d["run_rc"] = run_rc;
  d["ran_before_end"] = ran_in_sub_window;
  return d;
}

// ------------------------------------------------------------ finalization
// File descriptor the finalization markers write to (set by the child
// script).  Written once on the main thread before any reader runs; read by
// callbacks that run later on the main thread or, for after_finalize, on a
// thread started after the write, so relaxed + thread creation suffice.
std::atomic<int> g_marker_fd{2};

void write_line(const char* fmt, long a, long b = 0) {
  char buf[128];
  int n = std::snprintf(buf, sizeof buf, fmt, a, b);
  if (n > 0) {
    // Relaxed: see g_marker_fd.
    ssize_t w = ::write(g_marker_fd.load(std::memory_order_relaxed), buf, static_cast<size_t>(n));
    (void)w;
  }
}

/// Pending call used during finalization: writes "ran:<tag>" and nothing else
/// (no Python object is touched, so it is safe whenever it runs).
int marker_call(void* arg) {
  write_line("ran:%ld\n", static_cast<long>(reinterpret_cast<std::intptr_t>(arg)));
  return 0;
}

int is_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();  // public since 3.13
#else
  return _Py_IsFinalizing();  // Include/cpython/pylifecycle.h, 3.10-3.12
#endif
}

void set_marker_fd(int fd) {
  // Relaxed: see g_marker_fd (written before any reader thread exists or runs).
  g_marker_fd.store(fd, std::memory_order_relaxed);
}

int add_marker_from_foreign(long tag) {
  int rc = 0;
  on_foreign_thread([&] {
    rc = Py_AddPendingCall(marker_call, reinterpret_cast<void*>(static_cast<std::intptr_t>(tag)));
  });
  write_line("add:%ld:%ld\n", tag, rc);
  return rc;
}

int add_marker_from_main(long tag) {
  int rc = Py_AddPendingCall(marker_call, reinterpret_cast<void*>(static_cast<std::intptr_t>(tag)));
  write_line("add:%ld:%ld\n", tag, rc);
  return rc;
}

void ll_exit_callback() {
  write_line("ll_initialized=%ld\n", static_cast<long>(Py_IsInitialized()));
}

/// Registered with Py_AtExit: runs at the end of Py_FinalizeEx.
int arm_ll_exit() { return Py_AtExit(ll_exit_callback); }

/// C atexit handler: runs in exit(), after Py_RunMain's Py_FinalizeEx has
/// returned.  A foreign thread adds a pending call, as CUDA's destructor
/// thread could at that moment.  On 3.10-3.12 this is expected to crash
/// (the main interpreter pointer is gone); the parent records the signal.
void after_finalize_handler() {
  write_line("after:start:%ld\n", static_cast<long>(Py_IsInitialized()));
  int rc = 0;
  on_foreign_thread([&] { rc = Py_AddPendingCall(marker_call, reinterpret_cast<void*>(99)); });
  write_line("after:rc:%ld\n", rc);
}

int arm_after_finalize() { return std::atexit(after_finalize_handler); }

// ------------------------------------------------------------ exit-time flush
/// Pending call of the exit-flush child: writes "flush:ran:<frame>" (1 when a
/// Python frame runs on this thread, 0 in CPython's exit-time flush) and fails
/// as a pending call may: -1 with RuntimeError set.  Main thread, GIL held.
int failing_flush_call(void*) {
  PyFrameObject* f = PyThreadState_GetFrame(PyThreadState_Get());  // new reference or NULL
  Py_XDECREF(f);
  write_line("flush:ran:%ld\n", f != nullptr ? 1L : 0L);
  PyErr_SetString(PyExc_RuntimeError, "probe: pending call failed in the exit-time flush");
  return -1;
}

/// Wrap threading._shutdown with a C function that calls it, then adds
/// failing_flush_call from this (the main) thread and returns.  Py_FinalizeEx
/// calls threading._shutdown from C (wait_for_thread_shutdown) and then
/// _Py_FinishPendingCalls with no Python frame run in between
/// (Python/pylifecycle.c Py_FinalizeEx, v3.10.0 to v3.14.0;
/// make_pre_finalization_calls on main for 3.15), so the call is first run by
/// the flush, whatever the eval breaker says.  Thread: main, GIL held.
/// Blocks: no.  Errors: a Python exception if threading cannot be imported.
void arm_exit_flush() {
  py::module_ threading = py::module_::import("threading");
  py::object original = threading.attr("_shutdown");
  threading.attr("_shutdown") = py::cpp_function([original]() {
    original();
    int rc = Py_AddPendingCall(failing_flush_call, nullptr);
    write_line("flush:add:%ld\n", static_cast<long>(rc));
  });
}

// ------------------------------------------------------------ fork
/// Queue `n` calls from a foreign thread (joined before the fork, so no
/// thread is inside Py_AddPendingCall), fork on this thread with no bytecode
/// in between, and let the child run Py_MakePendingCalls once: how many of
/// the calls queued before fork() does the child run?  The child reports
/// through a pipe and leaves with _exit; the parent keeps its own copies of
/// the calls queued (they run there at its next check).
/// Thread: main, GIL held (Py_MakePendingCalls runs only on the main thread).
/// Blocks: joins the foreign thread (bounded), then waits for the child
/// (which makes one Py_MakePendingCalls and exits) with the GIL released.
/// Memory ordering: join() publishes the foreign adds; the child reads the
/// slots' `ran` with acquire loads (its own calls, same thread).
/// Errors: returns {"child_ran": -1, ...} when fork, the pipe or the child
/// failed; raises RuntimeError when an add was refused.
/// Source: PyOS_BeforeFork/PyOS_AfterFork_Child/PyOS_AfterFork_Parent
/// (Modules/posixmodule.c, what os.fork calls, v3.10.0..v3.15.0rc1); after
/// fork CPython re-initialises the pending-call locks and leaves the rings as
/// they are (_PyEval_ReInitThreads, Python/ceval.c v3.10.0/v3.11.0 and
/// Python/ceval_gil.c v3.12.0..v3.15.0rc1; _PyRuntimeState_ReInitThreads,
/// Python/pystate.c v3.12.0..v3.15.0rc1).
py::dict fork_keeps_queued(int n) {
  std::size_t base = alloc_slots(static_cast<std::size_t>(n));
  int refused = 0;
  on_foreign_thread([&] {
    for (int i = 0; i < n; ++i)
      if (Py_AddPendingCall(record_call, &g_slots[base + i]) != 0) ++refused;
  });
  if (refused) throw std::runtime_error("fork_keeps_queued: an add was refused");
  int fds[2];
  py::dict d;
  d["base"] = base;
  d["queued"] = n;
  d["child_ran"] = -1;
  d["child_status"] = -1;
  if (::pipe(fds) != 0) return d;
  PyOS_BeforeFork();
  pid_t pid = ::fork();
  if (pid == 0) {
    PyOS_AfterFork_Child();
    ::close(fds[0]);
    (void)Py_MakePendingCalls();
    if (PyErr_Occurred()) PyErr_Clear();
    int ran_in_child = 0;
    for (int i = 0; i < n; ++i)
      // Acquire: pairs with record_call's release (same thread here).
      ran_in_child += g_slots[base + i].ran.load(std::memory_order_acquire);
    ssize_t w = ::write(fds[1], &ran_in_child, sizeof ran_in_child);
    ::_exit(w == static_cast<ssize_t>(sizeof ran_in_child) ? 0 : 3);
  }
  PyOS_AfterFork_Parent();
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return d;
  }
  int child_ran = -1, status = -1;
  {
    py::gil_scoped_release nogil;
    if (::read(fds[0], &child_ran, sizeof child_ran) != static_cast<ssize_t>(sizeof child_ran))
      child_ran = -1;
    ::close(fds[0]);
    if (::waitpid(pid, &status, 0) != pid) status = -1;
  }
  d["child_ran"] = child_ran;
  d["child_status"] = status;
  return d;
}

}  // namespace

namespace deferred_cleanup::bindings {

void register_probe_pep788(pybind11::module_& m);  // reference/src/probe_pep788.cpp

/// Bind the probe's measuring steps as deferred_cleanup._native.probe.
/// Thread: main, at import.  Blocks: no.  Memory ordering: n/a.
/// Errors: pybind11 raises on binding failure.  Source: Py_AddPendingCall, Python/ceval_gil.c
/// v3.12.0 (what the probe measures).
void register_probe(pybind11::module_& m) {
  m.def("now_ms", &now_ms, "Steady-clock milliseconds since the module loaded (float).");
  m.def(
      "step", [] { g_step.fetch_add(1, std::memory_order_relaxed); },  // GIL-ordered, see g_step
      "Advance the eval-breaker step counter; call between bytecodes.");
  m.def("fill_from_foreign", &fill_from_foreign, py::arg("limit") = 10000,
        "Fill the pending-call queue from a foreign thread while holding the GIL; return what was "
        "seen.");
  m.def("queue_calls", &queue_calls, py::arg("n_foreign"), py::arg("n_main") = 0,
        py::arg("n_fail") = 0,
        "Queue n_foreign calls from a foreign thread, then n_main from the main thread; the first "
        "n_fail raise.");
  m.def(
      "next_slot",
      [] { return g_next_slot.load(std::memory_order_relaxed); },  // main thread only, GIL-ordered
      "Index of the slot the next allocation will return (int).");
  m.def("start_foreign_add", &start_foreign_add, py::arg("delay_ms"),
        "Start a foreign thread that adds one pending call after delay_ms; return its slot index.");
  m.def("join_foreign", &join_foreign, "Join the foreign threads start_foreign_add started.");
  m.def("ran", &ran, py::arg("slot"), "True once the pending call of this slot ran.");
  m.def("slot", &slot, py::arg("slot"), "The record of one slot (dict).");
  m.def("blocking_call", &blocking_call, py::arg("ms"),
        "Release the GIL and sleep ms milliseconds; return (start_ms, end_ms).");
  m.def(
      "make_pending_calls", [] { return Py_MakePendingCalls(); },
      "Py_MakePendingCalls() on this thread (int); leaves any exception set as raised.");
  m.def("subinterpreter_add", &subinterpreter_add, py::arg("code"), py::arg("add_delay_ms"),
        "Run code in a new legacy subinterpreter while a foreign thread adds a pending call.");
  m.def("main_interpreter_id", [] { return PyInterpreterState_GetID(PyInterpreterState_Main()); });
  m.def("is_finalizing", &is_finalizing,
        "Py_IsFinalizing() (3.13+) or _Py_IsFinalizing() (3.10-3.12).");
  m.def(
      "is_initialized", [] { return Py_IsInitialized(); }, "Py_IsInitialized().");
  m.def("set_marker_fd", &set_marker_fd, py::arg("fd"),
        "File descriptor the finalization markers write to.");
  m.def("add_marker_from_foreign", &add_marker_from_foreign, py::arg("tag"),
        "Add a marker pending call from a foreign thread; writes add:<tag>:<rc>.");
  m.def("add_marker_from_main", &add_marker_from_main, py::arg("tag"),
        "Add a marker pending call from this thread; writes add:<tag>:<rc>.");
  m.def("arm_ll_exit", &arm_ll_exit,
        "Py_AtExit a callback writing ll_initialized=<Py_IsInitialized()>.");
  m.def("arm_after_finalize", &arm_after_finalize,
        "std::atexit a handler that adds a pending call from a foreign thread after Py_FinalizeEx "
        "returned.");
  m.def("arm_exit_flush", &arm_exit_flush,
        "Wrap threading._shutdown so that, after it, the main thread adds a pending call that "
        "writes flush:ran:<frame> and returns -1 with RuntimeError set; CPython's exit-time "
        "flush (_Py_FinishPendingCalls) is the first to run it.");
  m.def("fork_keeps_queued", &fork_keeps_queued, py::arg("n"),
        "Queue n calls from a foreign thread, fork at once, and return how many of them the "
        "child runs at its first Py_MakePendingCalls (dict: base, queued, child_ran, "
        "child_status).");
  register_probe_pep788(m);  // PEP 788 steps (3.15+; pep788_available() says)
}

}  // namespace deferred_cleanup::bindings
