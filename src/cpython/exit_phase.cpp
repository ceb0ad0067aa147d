// SPDX-License-Identifier: Apache-2.0
//
// exit_phase.cpp: see exit_phase.hpp.
#include "exit_phase.hpp"

#include <chrono>
#include <thread>

namespace deferred_cleanup::cpython::detail {

namespace {

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Calls module.method(arg).  0, or -1 with the exception set.
int call_with(const char* module, const char* method, PyObject* arg) {
  if (arg == nullptr) return -1;
  PyObject* m = PyImport_ImportModule(module);
  if (m == nullptr) return -1;
  PyObject* r = PyObject_CallMethod(m, method, "O", arg);
  Py_DECREF(m);
  if (r == nullptr) return -1;
  Py_DECREF(r);
  return 0;
}

#if PY_VERSION_HEX < 0x030E0000  // 3.10-3.13: the hook registered last, run first
/// One registered sequence and its hook's state (the GIL guards it).
/// Leaked on purpose: atexit and threading hold functions bound to it.
struct LastHook {
  PyObject* sequence;       // strong reference
  bool registered = false;  // the threading callback ran (registered the hook)
  bool running = false;
  bool done = false;
};

LastHook* hook_of(PyObject* capsule) {
  return static_cast<LastHook*>(PyCapsule_GetPointer(capsule, "deferred_cleanup.exit_hook"));
}

/// The atexit hook: every other handler once, then the sequence.
PyObject* last_hook(PyObject* capsule, PyObject*) {
  LastHook* h = hook_of(capsule);
  if (h == nullptr) return nullptr;
  if (h->running || h->done) Py_RETURN_NONE;  // the nested call from _run_exitfuncs
  h->running = true;
  PyObject* atexit = PyImport_ImportModule("atexit");
  PyObject* r =
      atexit != nullptr ? PyObject_CallMethod(atexit, "_run_exitfuncs", nullptr) : nullptr;
  Py_XDECREF(atexit);
  if (r == nullptr) PyErr_WriteUnraisable(nullptr);
  Py_XDECREF(r);
  h->running = false;
  h->done = true;
  return PyObject_CallNoArgs(h->sequence);
}
PyMethodDef g_last_hook_def = {"_deferred_cleanup_exit_hook", &last_hook, METH_NOARGS, nullptr};

/// The threading exit callback: registers the hook with atexit, last.
PyObject* register_last(PyObject* capsule, PyObject*) {
  LastHook* h = hook_of(capsule);
  if (h == nullptr) return nullptr;
  PyObject* hook = PyCFunction_New(&g_last_hook_def, capsule);
  const int rc = call_with("atexit", "register", hook);
  Py_XDECREF(hook);
  if (rc != 0) return nullptr;
  h->registered = true;
  Py_RETURN_NONE;
}
PyMethodDef g_register_last_def = {"_deferred_cleanup_register_last", &register_last, METH_NOARGS,
                                   nullptr};

/// The fallback, a plain atexit handler registered at the import: runs the
/// sequence only when the threading callback never ran.  An exception that
/// ends threading._shutdown before the callbacks registered earlier (a
/// KeyboardInterrupt from Ctrl-C, a signal handler, a pending call, or a
/// later-registered callback) skips them: Lib/threading.py v3.10.0-v3.13.0,
/// _shutdown calls each in turn with no try; Python/pylifecycle.c
/// (wait_for_thread_shutdown) reports its exception as unraisable and goes on
/// to the atexit phase.  In the normal case the last hook runs it nested,
/// from _run_exitfuncs, and it returns at once.
PyObject* fallback_hook(PyObject* capsule, PyObject*) {
  LastHook* h = hook_of(capsule);
  if (h == nullptr) return nullptr;
  if (h->registered || h->done) Py_RETURN_NONE;
  h->done = true;
  return PyObject_CallNoArgs(h->sequence);
}
PyMethodDef g_fallback_def = {"_deferred_cleanup_exit_fallback", &fallback_hook, METH_NOARGS,
                              nullptr};
#endif

}  // namespace

int register_exit_sequence(PyObject* sequence) noexcept {
#if PY_VERSION_HEX < 0x030E0000
  auto* h = new LastHook{Py_NewRef(sequence)};
  PyObject* capsule = PyCapsule_New(h, "deferred_cleanup.exit_hook", nullptr);
  if (capsule == nullptr) return -1;  // h leaked with its reference: import fails anyway
  PyObject* later = PyCFunction_New(&g_register_last_def, capsule);
  PyObject* fallback = PyCFunction_New(&g_fallback_def, capsule);
  Py_DECREF(capsule);
  const int rc = call_with("threading", "_register_atexit", later);
  Py_XDECREF(later);
  if (rc == 0) {
    const int fallback_rc = call_with("atexit", "register", fallback);
    Py_XDECREF(fallback);
    return fallback_rc;
  }
  Py_XDECREF(fallback);
  if (!PyErr_ExceptionMatches(PyExc_AttributeError) && !PyErr_ExceptionMatches(PyExc_RuntimeError))
    return -1;
  PyErr_Clear();  // missing, or threading already shut down: a plain handler
#endif
  return call_with("atexit", "register", sequence);
}

void exit_wait(InterruptRule& rule, std::int64_t bound_ns, DrainAndDue drain_and_due,
               void* ctx) noexcept {
  const std::int64_t start = steady_ns();
  for (;;) {
    // A cleanup's interrupt does not end the wait: it is kept (or sent to
    // sys.unraisablehook) and the wait goes on releasing what is due.
    if (!drain_and_due(ctx) || steady_ns() - start >= bound_ns) return;
    PyThreadState* ts = PyEval_SaveThread();  // the GIL released while it sleeps
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    PyEval_RestoreThread(ts);
    if (PyErr_CheckSignals() != 0 && rule.report(nullptr)) return;  // Ctrl-C: ends the wait
  }
}

}  // namespace deferred_cleanup::cpython::detail
