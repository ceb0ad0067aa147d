// SPDX-License-Identifier: Apache-2.0
// host_pep788.cpp: the host's Py_AddPendingCall, optionally inside a PEP 788
// interpreter guard.  The alternative the docs page "PEP 788 and this
// contract" (docs/pep788.rst) measures against the in-flight gate; off by
// default (kept for the measurement, not used by the reference).
//
// Built with -DDC_PEP788_GUARD=ON (CMake option) against CPython 3.15+, every
// host call does
//
//     guard = PyInterpreterGuard_FromView(view)   // NULL once guards are refused
//     Py_AddPendingCall(fn, arg)                  // only with a guard
//     PyInterpreterGuard_Close(guard)
//
// from the producer's thread, beside the in-flight gate (which still decides
// whether a producer may call at all).  The view is made once, at import.
// What the guard costs the callback's contract (one PyMem_RawMalloc and one
// PyMem_RawFree per call, HEAD_LOCK inside FromView; Python/pystate.c
// v3.15.0rc1) is what the page weighs; the probe measures the same on its own
// (reference/src/probe_pep788.cpp).
//
// Without the option, or before 3.15, guarded_add_pending_call is
// Py_AddPendingCall and guard_counters() reports the mode "off".
#include <pybind11/pybind11.h>

#include <Python.h>

#include <atomic>
#include <cstdint>

#if defined(DC_PEP788_GUARD) && DC_PEP788_GUARD && PY_VERSION_HEX >= 0x030F0000
#define DC_GUARD_ON 1
#else
#define DC_GUARD_ON 0
#endif

namespace deferred_cleanup::host {

namespace {
// Statistics only (relaxed): how many guards were asked for and refused.
std::atomic<std::uint64_t> g_guards_taken{0};
std::atomic<std::uint64_t> g_guards_refused{0};
#if DC_GUARD_ON
PyInterpreterView* g_guard_view = nullptr;  // made at import, never closed (pins nothing)
#endif
}  // namespace

/// Py_AddPendingCall, inside a PEP 788 guard when built with DC_PEP788_GUARD.
///
/// Thread: any (a producer with no thread state, or the main thread).
/// Blocks: on CPython's pending-call lock; with the guard also on HEAD_LOCK
/// (a PyMutex) inside PyInterpreterGuard_FromView.  Allocates: with the
/// guard, one PyMem_RawMalloc per call (freed by PyInterpreterGuard_Close).
/// Memory ordering: none of its own (CPython's atomics on finalization_guards).
/// Errors: -1 when the guard is refused (finalization past its atexit phase)
/// or the queue is full; no exception is set.
/// Source: Include/pystate.h, Python/pystate.c PyInterpreterGuard_FromView
/// (v3.15.0rc1); Py_AddPendingCall, Python/ceval_gil.c.
int guarded_add_pending_call(int (*fn)(void*), void* arg) {
#if DC_GUARD_ON
  PyInterpreterGuard* g = PyInterpreterGuard_FromView(g_guard_view);
  if (g == nullptr) {
    g_guards_refused.fetch_add(1, std::memory_order_relaxed);  // statistics only
    return -1;
  }
  g_guards_taken.fetch_add(1, std::memory_order_relaxed);  // statistics only
  const int rc = Py_AddPendingCall(fn, arg);
  PyInterpreterGuard_Close(g);
  return rc;
#else
  return Py_AddPendingCall(fn, arg);
#endif
}

/// Bind guard_counters() on the module: {"mode", "taken", "refused"}.
/// Thread: main, at import (makes the view then).  Blocks: no.
/// Errors: pybind11 raises on binding failure or when the view cannot be made.
/// Source: Include/pystate.h PyInterpreterView_FromMain (v3.15.0rc1).
void register_guard(pybind11::module_& m) {
#if DC_GUARD_ON
  g_guard_view = PyInterpreterView_FromMain();
  if (g_guard_view == nullptr) throw pybind11::error_already_set();
#endif
  m.def(
      "guard_counters",
      [] {
        pybind11::dict d;
        d["mode"] = DC_GUARD_ON ? "pep788" : "off";
        d["taken"] = g_guards_taken.load(std::memory_order_relaxed);
        d["refused"] = g_guards_refused.load(std::memory_order_relaxed);
        return d;
      },
      "PEP 788 guard mode of the host's Py_AddPendingCall ('pep788' or 'off') and its counts "
      "(dict).");
}

}  // namespace deferred_cleanup::host
