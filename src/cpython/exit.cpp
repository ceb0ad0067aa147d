// SPDX-License-Identifier: Apache-2.0
//
// exit.cpp: the CPython host at interpreter exit.
//
//   atexit phase   the exit sequence: step 0, drain while the user's
//                  outstanding() says work is due or items are queued
//                  (bounded by exit_wait_ns); steps 1-3 (shutdown.hpp): close,
//                  wait out producers in the gate, final drain.  The host stays
//                  alive for main-thread drains until CPython finalizes (step
//                  4, note_finalizing).  Registered from C, last on 3.10-3.13.
//   Py_AtExit      the backstop: host dead, wait (bounded) for producers still
//                  inside Py_AddPendingCall, count the leaked items.  No
//                  Python API from there on.
#include <chrono>
#include <cstdio>
#include <thread>

#include "deferred_cleanup/shutdown.hpp"
#include "host_internal.hpp"

namespace deferred_cleanup::cpython::detail {

namespace {

bool g_outstanding_failed = false;  // the user's outstanding() raised: not asked again

/// Whether step 0 should go on waiting: items are queued, or the user's
/// outstanding() says work is due.  An outstanding() that leaves an exception
/// set counts as "none due" and is not asked again; its exception is reported
/// (report_host_error), so the error state is clear when finalization runs.
bool work_due() {
  if (!g.queue->empty_snapshot()) return true;
  if (g.opts.outstanding == nullptr || g_outstanding_failed) return false;
  const std::uint64_t n = g.opts.outstanding(g.opts.outstanding_ctx);
  if (PyErr_Occurred() != nullptr) {
    g_outstanding_failed = true;
    report_host_error();
    return false;
  }
  return n != 0;
}

/// The exit sequence.  Main thread, GIL held (an atexit handler).  Its drains
/// never stop early.  Returns None, or NULL with a cleanup's
/// KeyboardInterrupt/SystemExit set (the first of its own drains, or one
/// held from CPython's exit-time flush).
PyObject* exit_sequence(PyObject*, PyObject*) {
  Queue& q = *g.queue;
  if (g.exit_ran || !q.host_alive() || !is_main_thread()) Py_RETURN_NONE;
  // 0. Drain while work is due, up to the exit wait; the GIL is released
  //    between drains so the user's threads (and Python threads) progress.
  const std::int64_t start = now_ns();
  const std::int64_t bound = q.settings.exit_wait_ns.load(std::memory_order_relaxed);  // setting
  g.exit_sequence_running = true;  // releases everything: no early stop (host_stop_drain)
  //    A KeyboardInterrupt/SystemExit (Ctrl-C, from a signal handler run
  //    here or by a cleanup) ends the wait; steps 1-3 still run, and the
  //    interrupt is raised at the end.
  for (;;) {
    drain_all(q);
    if (interrupt_kept() || !work_due() || now_ns() - start >= bound) break;
    PyThreadState* ts = PyEval_SaveThread();  // the GIL released while it sleeps
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    PyEval_RestoreThread(ts);
    if (PyErr_CheckSignals() != 0) report_host_error();  // Ctrl-C: kept, ends the wait
  }
  // 1.-3. Close, wait out the gate, final drain.
  shutdown_at_exit(q, kDefaultGateBound);
  g.exit_sequence_running = false;
  g.exit_ran = true;
  // The first interrupt of its cleanups, or one held from CPython's
  // exit-time flush (host_after_drain), is raised here.
  if (deliver_deferred_interrupt() != 0) return nullptr;
  Py_RETURN_NONE;
}

PyMethodDef g_sequence_def = {"_deferred_cleanup_exit_sequence", &exit_sequence, METH_NOARGS,
                              nullptr};

#if PY_VERSION_HEX < 0x030E0000  // used by register_exit() on 3.10-3.13 only
// 3.10-3.13: the hook registered last (so run first) runs every other
// handler itself, then the sequence (reference/python/deferred_cleanup/
// __init__.py, _register_exit_hook, says why; Modules/atexitmodule.c).
bool g_hook_running = false, g_hook_done = false;

PyObject* last_hook(PyObject*, PyObject*) {
  if (g_hook_running || g_hook_done) Py_RETURN_NONE;
  g_hook_running = true;
  PyObject* atexit = PyImport_ImportModule("atexit");
  PyObject* r =
      atexit != nullptr ? PyObject_CallMethod(atexit, "_run_exitfuncs", nullptr) : nullptr;
  Py_XDECREF(atexit);
  if (r == nullptr) PyErr_WriteUnraisable(nullptr);
  Py_XDECREF(r);
  g_hook_running = false;
  g_hook_done = true;
  return exit_sequence(nullptr, nullptr);
}

PyMethodDef g_last_hook_def = {"_deferred_cleanup_exit_hook", &last_hook, METH_NOARGS, nullptr};

PyObject* register_last(PyObject*, PyObject*) {
  PyObject* atexit = PyImport_ImportModule("atexit");
  if (atexit == nullptr) return nullptr;
  PyObject* hook = PyCFunction_New(&g_last_hook_def, nullptr);
  PyObject* r = hook != nullptr ? PyObject_CallMethod(atexit, "register", "O", hook) : nullptr;
  Py_XDECREF(hook);
  Py_DECREF(atexit);
  if (r == nullptr) return nullptr;
  Py_DECREF(r);
  Py_RETURN_NONE;
}
PyMethodDef g_register_last_def = {"_deferred_cleanup_register_last", &register_last, METH_NOARGS,
                                   nullptr};
#endif

int call_with_function(const char* module, const char* method, PyMethodDef* def) {
  PyObject* m = PyImport_ImportModule(module);
  if (m == nullptr) return -1;
  PyObject* f = PyCFunction_New(def, nullptr);
  PyObject* r = f != nullptr ? PyObject_CallMethod(m, method, "O", f) : nullptr;
  Py_XDECREF(f);
  Py_DECREF(m);
  if (r == nullptr) return -1;
  Py_DECREF(r);
  return 0;
}

/// How long the backstop waits for producers inside Py_AddPendingCall.
constexpr std::int64_t kBackstopWaitNs = 5'000'000'000;  // 5 s

/// The Py_AtExit backstop.  The thread running Py_FinalizeEx, after the
/// interpreter is gone: no Python API.
void backstop() {
  g.torn_down.store(true, std::memory_order_seq_cst);  // pairs with in_host (seq_cst)
  Queue& q = *g.queue;
  q.close();  // already closed by the exit sequence unless it never ran
  q.mark_host_dead();
  wait_for_host_calls(g.in_host, now_ns() + kBackstopWaitNs);  // bounded (host_threads.hpp)
  backstop_at_exit(q);  // counts the leaked items, touches none
}

}  // namespace

int register_exit() {
  // Py_AtExit: -1 when CPython's table (32 callbacks) is full
  // (Python/pylifecycle.c, Include/internal/pycore_atexit.h, v3.12.0).
  if (Py_AtExit(&backstop) != 0) {
    std::fprintf(stderr,
                 "deferred_cleanup: CPython's Py_AtExit table is full: no backstop at "
                 "finalization (leaks after the exit sequence are not counted)\n");
  }
#if PY_VERSION_HEX < 0x030E0000
  // 3.10-3.13: threading._register_atexit callbacks run in threading._shutdown,
  // before the atexit handlers (Lib/threading.py, v3.9+).
  if (call_with_function("threading", "_register_atexit", &g_register_last_def) == 0) return 0;
  if (!PyErr_ExceptionMatches(PyExc_AttributeError) && !PyErr_ExceptionMatches(PyExc_RuntimeError))
    return -1;
  PyErr_Clear();
#endif
  // 3.14+ runs atexit handlers from a copy of its list: the sequence is a
  // plain handler, at the position of the import.
  return call_with_function("atexit", "register", &g_sequence_def);
}

}  // namespace deferred_cleanup::cpython::detail
