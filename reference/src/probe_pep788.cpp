// SPDX-License-Identifier: Apache-2.0
// deferred_cleanup._native.probe, PEP 788 part: what CPython 3.15's
// interpreter guards do for a foreign thread (one with no thread state).
//
// PEP 788 (gh-149101, CPython 3.15) lets a thread that may outlive the
// interpreter pin it: PyInterpreterView_FromMain() names the main interpreter
// without pinning it; PyInterpreterGuard_FromView(view) pins it (the
// interpreter's `finalization_guards` counter goes up) or returns NULL once
// finalization no longer allows guards; PyInterpreterGuard_Close(guard) unpins
// it (Include/pystate.h, v3.15.0rc1).  That is what the reference's in-flight
// gate does by hand, so the probe measures what a CUDA destructor thread,
// which may not allocate, block or touch Python objects, would get from it:
//
//   * whether FromView succeeds from a foreign thread, and what it costs;
//   * how many allocations happen inside it, per allocator domain (counted by
//     forwarding hooks installed with PyMem_SetAllocator around the call);
//   * whether it waits for the GIL when tracemalloc traces the raw domain;
//   * in a child interpreter's finalization: from which point it fails,
//     whether Py_FinalizeEx waits for an open guard, and what becomes of a
//     Py_AddPendingCall made under a guard while Py_FinalizeEx waits for it.
//
// Before 3.15 the API does not exist: pep788_available() is false and the
// Python side reports every field as "absent".
//
// The view is made once, at import, on the main thread, and never closed:
// a view is a heap copy of the interpreter id and pins nothing.
#include <pybind11/pybind11.h>

#include <Python.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>

namespace py = pybind11;

namespace {

#if PY_VERSION_HEX >= 0x030F0000
#define DC_HAVE_PEP788 1
#else
#define DC_HAVE_PEP788 0
#endif

#if DC_HAVE_PEP788
using Clock = std::chrono::steady_clock;
const Clock::time_point g_epoch788 = Clock::now();
double ms_now() {
  return std::chrono::duration<double, std::milli>(Clock::now() - g_epoch788).count();
}

// Made at import (register_probe_pep788) on the main thread; read-only after.
PyInterpreterView* g_view = nullptr;

// ------------------------------------------------------------ allocation count
// Counting hooks: forward to the allocator that was installed before, and
// count on the thread whose t_counting is set (the foreign thread, only
// around the measured call).  Installed and removed by the main thread
// while it holds the GIL and no other thread of the probe runs.
thread_local bool t_counting = false;
std::atomic<int> g_allocs[3];  // per domain: raw, mem, obj (relaxed: read after join)
std::atomic<int> g_frees[3];
PyMemAllocatorEx g_saved[3];
const PyMemAllocatorDomain kDomains[3] = {PYMEM_DOMAIN_RAW, PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ};

template <int D>
void* hook_malloc(void*, size_t n) {
  if (t_counting) g_allocs[D].fetch_add(1, std::memory_order_relaxed);
  return g_saved[D].malloc(g_saved[D].ctx, n);
}
template <int D>
void* hook_calloc(void*, size_t a, size_t b) {
  if (t_counting) g_allocs[D].fetch_add(1, std::memory_order_relaxed);
  return g_saved[D].calloc(g_saved[D].ctx, a, b);
}
template <int D>
void* hook_realloc(void*, void* p, size_t n) {
  if (t_counting) g_allocs[D].fetch_add(1, std::memory_order_relaxed);
  return g_saved[D].realloc(g_saved[D].ctx, p, n);
}
template <int D>
void hook_free(void*, void* p) {
  if (t_counting && p != nullptr) g_frees[D].fetch_add(1, std::memory_order_relaxed);
  g_saved[D].free(g_saved[D].ctx, p);
}
template <int D>
PyMemAllocatorEx hooks() {
  return PyMemAllocatorEx{nullptr, hook_malloc<D>, hook_calloc<D>, hook_realloc<D>, hook_free<D>};
}

void install_hooks() {
  PyMemAllocatorEx h[3] = {hooks<0>(), hooks<1>(), hooks<2>()};
  for (int d = 0; d < 3; ++d) {
    g_allocs[d].store(0, std::memory_order_relaxed);
    g_frees[d].store(0, std::memory_order_relaxed);
    PyMem_GetAllocator(kDomains[d], &g_saved[d]);
    PyMem_SetAllocator(kDomains[d], &h[d]);
  }
}

void remove_hooks() {
  for (int d = 0; d < 3; ++d) PyMem_SetAllocator(kDomains[d], &g_saved[d]);
}

/// One FromView and one Close on a foreign thread, with allocations counted
/// inside each, then `n` timed FromView+Close pairs without hooks.
/// Thread: main, GIL held (joins the foreign thread).  Blocks: bounded.
/// Source: Python/pystate.c PyInterpreterGuard_FromView (v3.15.0rc1).
py::dict guard_from_foreign(int n) {
  py::dict d;
  bool ok = false;
  int a_from[3], f_from[3], a_close[3], f_close[3];
  install_hooks();
  std::thread([&] {
    t_counting = true;
    PyInterpreterGuard* g = PyInterpreterGuard_FromView(g_view);
    t_counting = false;
    for (int i = 0; i < 3; ++i) {
      a_from[i] = g_allocs[i].exchange(0, std::memory_order_relaxed);
      f_from[i] = g_frees[i].exchange(0, std::memory_order_relaxed);
    }
    ok = g != nullptr;
    if (g != nullptr) {
      t_counting = true;
      PyInterpreterGuard_Close(g);
      t_counting = false;
    }
    for (int i = 0; i < 3; ++i) {
      a_close[i] = g_allocs[i].exchange(0, std::memory_order_relaxed);
      f_close[i] = g_frees[i].exchange(0, std::memory_order_relaxed);
    }
  }).join();
  remove_hooks();
  double pair_ns = -1, from_ns = -1;
  int refused = 0;
  std::thread([&] {
    auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      PyInterpreterGuard* g = PyInterpreterGuard_FromView(g_view);
      if (g == nullptr) {
        ++refused;
        continue;
      }
      PyInterpreterGuard_Close(g);
    }
    auto t1 = Clock::now();
    pair_ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / (n > 0 ? n : 1);
    // FromView alone: keep the guards, close them after the clock stops.
    constexpr int kBatch = 256;
    PyInterpreterGuard* gs[kBatch];
    double total = 0;
    int done = 0;
    while (done < n) {
      int k = (n - done) < kBatch ? (n - done) : kBatch;
      auto a = Clock::now();
      for (int i = 0; i < k; ++i) gs[i] = PyInterpreterGuard_FromView(g_view);
      total += std::chrono::duration<double, std::nano>(Clock::now() - a).count();
      for (int i = 0; i < k; ++i)
        if (gs[i] != nullptr) PyInterpreterGuard_Close(gs[i]);
      done += k;
    }
    from_ns = total / (n > 0 ? n : 1);
  }).join();
  const char* names[3] = {"raw", "mem", "obj"};
  py::dict af, ff, ac, fc;
  for (int i = 0; i < 3; ++i) {
    af[names[i]] = a_from[i];
    ff[names[i]] = f_from[i];
    ac[names[i]] = a_close[i];
    fc[names[i]] = f_close[i];
  }
  d["ok"] = ok;
  d["allocs_in_from_view"] = af;
  d["frees_in_from_view"] = ff;
  d["allocs_in_close"] = ac;
  d["frees_in_close"] = fc;
  d["pair_ns"] = pair_ns;
  d["from_view_ns"] = from_ns;
  d["n"] = n;
  d["refused_in_timing"] = refused;
  return d;
}

/// FromView on a foreign thread while the main thread holds the GIL (or, on a
/// free-threaded build, stays attached) for `hold_ms` without releasing it;
/// then the main thread releases it and joins.  Run by Python with
/// tracemalloc tracing: Python/tracemalloc.c (v3.15.0rc1) takes
/// PyGILState_Ensure in its raw-domain hook.  Returns how long FromView took.
/// Thread: main, GIL held.  Blocks: hold_ms, then the join.
py::dict guard_while_main_holds_gil(double hold_ms) {
  std::atomic<int> started{0};
  double took_ms = -1, raw_ms = -1;
  bool ok = false;
  std::thread t([&] {
    started.store(1, std::memory_order_release);
    double r = ms_now();
    PyMem_RawFree(PyMem_RawMalloc(16));  // the allocation FromView makes, alone
    raw_ms = ms_now() - r;
    double a = ms_now();
    PyInterpreterGuard* g = PyInterpreterGuard_FromView(g_view);
    took_ms = ms_now() - a;
    ok = g != nullptr;
    if (g != nullptr) PyInterpreterGuard_Close(g);
  });
  while (started.load(std::memory_order_acquire) == 0) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(hold_ms));  // GIL held
  {
    py::gil_scoped_release nogil;
    t.join();
  }
  py::dict d;
  d["ok"] = ok;
  d["took_ms"] = took_ms;
  d["raw_malloc_ms"] = raw_ms;
  d["hold_ms"] = hold_ms;
  return d;
}

// ------------------------------------------------------------ finalization child
// Written by the child's threads, printed by the Py_AtExit callback (which
// runs after every other step of Py_FinalizeEx) with write(2) to fd 1.
std::atomic<double> g_atexit_end_ms{-1};  // the last Python atexit handler returned
std::atomic<double> g_close_ms{-1};       // the holder closed its guard
std::atomic<double> g_refused_ms{-1};     // the poller's first refusal
std::atomic<int> g_refused_after_atexit{-1};
std::atomic<int> g_ok_while_finalizing{0};  // a guard was held while Py_IsFinalizing()
std::atomic<int> g_poll_ok{0};
std::atomic<int> g_add_rc{-99};
std::atomic<double> g_add_ms{-1};
std::atomic<int> g_marker_ran{0};
std::atomic<double> g_marker_ran_ms{-1};
std::atomic<int> g_finalizing_at_add{-1};

void out(const char* fmt, double a) {
  char buf[128];
  int n = std::snprintf(buf, sizeof buf, fmt, a);
  if (n > 0) {
    ssize_t w = ::write(1, buf, static_cast<size_t>(n));
    (void)w;
  }
}

int marker788(void*) {
  g_marker_ran_ms.store(ms_now(), std::memory_order_relaxed);
  g_marker_ran.store(1, std::memory_order_release);
  return 0;
}

bool try_guard_on_foreign_thread() {
  bool ok = false;
  std::thread([&] {
    PyInterpreterGuard* g = PyInterpreterGuard_FromView(g_view);
    ok = g != nullptr;
    if (g != nullptr) PyInterpreterGuard_Close(g);
  }).join();
  return ok;
}

void ll_exit() {
  out("pep788:py_atexit_guard=%.0f\n", try_guard_on_foreign_thread() ? 1 : 0);
  out("pep788:atexit_end_ms=%.3f\n", g_atexit_end_ms.load());
  out("pep788:close_ms=%.3f\n", g_close_ms.load());
  out("pep788:refused_ms=%.3f\n", g_refused_ms.load());
  out("pep788:refused_after_atexit=%.0f\n", g_refused_after_atexit.load());
  out("pep788:ok_while_finalizing=%.0f\n", g_ok_while_finalizing.load());
  out("pep788:poll_ok=%.0f\n", g_poll_ok.load());
  out("pep788:add_rc=%.0f\n", g_add_rc.load());
  out("pep788:add_ms=%.3f\n", g_add_ms.load());
  out("pep788:finalizing_at_add=%.0f\n", g_finalizing_at_add.load());
  out("pep788:marker_ran=%.0f\n", g_marker_ran.load(std::memory_order_acquire));
  out("pep788:marker_ran_ms=%.3f\n", g_marker_ran_ms.load());
}

/// Called from the LAST Python atexit handler of the child (registered first).
/// Checks a guard from a foreign thread now, starts a holder thread that
/// keeps a guard `hold_ms` and adds a pending call `add_at_ms` into it, and a
/// poller that takes and closes guards until the first refusal (bounded by
/// 20 s).  Returns once the holder holds its guard.
/// Thread: main, GIL held, inside the atexit phase.  Blocks: until the holder
/// has its guard (bounded by the guard's own cost).
py::dict fin_arm(double hold_ms, double add_at_ms) {
  py::dict d;
  d["atexit_guard"] = try_guard_on_foreign_thread();
  Py_AtExit(ll_exit);
  std::atomic<int> held{0};
  std::thread([&held, hold_ms, add_at_ms] {
    PyInterpreterGuard* g = PyInterpreterGuard_FromView(g_view);
    held.store(g != nullptr ? 1 : 2, std::memory_order_release);
    if (g == nullptr) return;
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(add_at_ms));
    g_finalizing_at_add.store(Py_IsFinalizing(), std::memory_order_relaxed);
    g_add_rc.store(Py_AddPendingCall(marker788, nullptr), std::memory_order_relaxed);
    g_add_ms.store(ms_now(), std::memory_order_relaxed);
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(hold_ms - add_at_ms));
    g_close_ms.store(ms_now(), std::memory_order_relaxed);
    PyInterpreterGuard_Close(g);
  }).detach();
  while (held.load(std::memory_order_acquire) == 0) std::this_thread::yield();
  d["holder_guard"] = held.load(std::memory_order_acquire) == 1;
  std::thread([] {
    const double end = ms_now() + 20000;
    while (ms_now() < end) {
      PyInterpreterGuard* g = PyInterpreterGuard_FromView(g_view);
      if (g == nullptr) {
        g_refused_ms.store(ms_now(), std::memory_order_relaxed);
        g_refused_after_atexit.store(g_atexit_end_ms.load() >= 0 ? 1 : 0,
                                     std::memory_order_relaxed);
        return;
      }
      g_poll_ok.fetch_add(1, std::memory_order_relaxed);
      // Holding a guard, the interpreter cannot have reached its finalizing flag.
      if (Py_IsFinalizing()) g_ok_while_finalizing.store(1, std::memory_order_relaxed);
      PyInterpreterGuard_Close(g);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }).detach();
  return d;
}
#endif  // DC_HAVE_PEP788

}  // namespace

namespace deferred_cleanup::bindings {

/// Bind the PEP 788 steps into the probe submodule (pep788_* names).
/// Thread: main, at import (makes the view then).  Blocks: no.
/// Memory ordering: n/a.  Errors: pybind11 raises on binding failure.
/// Source: Include/pystate.h "PEP 788" (v3.15.0rc1), Python/pystate.c.
void register_probe_pep788(py::module_& m) {
  m.def(
      "pep788_available", [] { return DC_HAVE_PEP788 != 0; },
      "True when built against CPython 3.15+ (PyInterpreterGuard exists).");
#if DC_HAVE_PEP788
  g_view = PyInterpreterView_FromMain();
  if (g_view == nullptr) throw py::error_already_set();
  m.def("pep788_guard_from_foreign", &guard_from_foreign, py::arg("n") = 20000,
        "One counted FromView/Close on a foreign thread, then n timed pairs (dict).");
  m.def("pep788_guard_while_main_holds_gil", &guard_while_main_holds_gil, py::arg("hold_ms"),
        "FromView on a foreign thread while this thread keeps the GIL hold_ms (dict).");
  m.def("pep788_fin_arm", &fin_arm, py::arg("hold_ms"), py::arg("add_at_ms"),
        "Finalization child: holder and poller threads, Py_AtExit report (dict).");
  m.def(
      "pep788_atexit_end", [] { g_atexit_end_ms.store(ms_now()); },
      "Mark the end of the last Python atexit handler.");
#endif
}

}  // namespace deferred_cleanup::bindings
