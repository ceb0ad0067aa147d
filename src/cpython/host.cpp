// SPDX-License-Identifier: Apache-2.0
//
// host.cpp: the CPython host while the interpreter lives (see
// host_internal.hpp for the split).  The rules are the reference module's
// (reference/src/host.cpp), on the plain C API, for one queue of the
// reference policy per extension.
#include <pthread.h>

#include <chrono>
#include <cstdlib>
#include <new>

#include "host_internal.hpp"

namespace deferred_cleanup::cpython::detail {

State g;

namespace {

int trampoline(void* arg);

int host_add_pending_call(PendingCallFn, void* arg) {
  // Announces us to the backstop's wait (seq_cst: pairs with its store of
  // torn_down then load of in_host, a store-buffering pair).
  g.in_host.fetch_add(1, std::memory_order_seq_cst);
  // Py_AddPendingCall needs no thread state (Python/ceval_gil.c, v3.12.0).
  const int rc = Py_AddPendingCall(&trampoline, arg);
  g.in_host.fetch_sub(1, std::memory_order_release);  // read by the backstop's wait
  return rc;
}

// Cleanups running now (main thread, GIL held): a drain inside a cleanup
// delivers nothing.
int g_cleanup_depth = 0;
PyObject *g_def_type = nullptr, *g_def_value = nullptr, *g_def_tb = nullptr;

int host_after_drain() { return deliver_deferred_interrupt(); }

/// The Host the core calls (C++17: no designated initializers).
Host make_core_host() {
  Host h;
  h.add_pending_call = &host_add_pending_call;
  h.is_main_thread = &is_main_thread;
  h.now_ns = &now_ns;
  h.after_drain = &host_after_drain;  // in_gate and finalizing stay nullptr
  return h;
}
Host g_core_host = make_core_host();

/// The pending call: step 4 first (host dead once finalizing), then the
/// core's pending_call.  Main thread, GIL held (CPython calls it).
int trampoline(void* arg) {
  note_finalizing();
  const bool outer = g.in_pending_call;
  g.in_pending_call = true;
  const int rc = pending_call<ReferencePolicy>(arg);
  g.in_pending_call = outer;
  return rc;
}

/// The cleanup error and interrupt rule, for the exception a cleanup left
/// set.  Main thread, GIL held.
void report_cleanup_error() {
  if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt) || PyErr_ExceptionMatches(PyExc_SystemExit)) {
    if (g_def_type == nullptr) {
      PyErr_Fetch(&g_def_type, &g_def_value, &g_def_tb);
      PyErr_NormalizeException(&g_def_type, &g_def_value, &g_def_tb);
      return;
    }
  }
  g.unraisable.fetch_add(1, std::memory_order_relaxed);  // statistics only
  PyErr_WriteUnraisable(nullptr);
}

/// The core's cleanup of every item: the user's cleanup with the current
/// exception saved around it, then the rule, then free the item.
void item_cleanup(void* arg) noexcept {
  auto* it = static_cast<dc_item*>(arg);
  if (!is_main_thread()) g.cleaned_off_main.fetch_add(1, std::memory_order_relaxed);  // stats
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  ++g_cleanup_depth;
  it->fn(it->payload);
  if (PyErr_Occurred()) report_cleanup_error();
  --g_cleanup_depth;
  PyErr_Restore(t, v, tb);
  std::free(it);
}

PyObject* main_thread_ident(unsigned long* out) {
  PyObject* threading = PyImport_ImportModule("threading");
  if (threading == nullptr) return nullptr;
  PyObject* mt = PyObject_CallMethod(threading, "main_thread", nullptr);
  Py_DECREF(threading);
  if (mt == nullptr) return nullptr;
  PyObject* ident = PyObject_GetAttrString(mt, "ident");
  Py_DECREF(mt);
  if (ident == nullptr) return nullptr;
  *out = PyLong_AsUnsignedLong(ident);
  Py_DECREF(ident);
  if (PyErr_Occurred()) return nullptr;
  return Py_None;
}

}  // namespace

bool is_main_thread() { return PyThread_get_thread_ident() == g.main_ident; }

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool finalizing_now() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

void note_finalizing() {
  if (g.queue != nullptr && finalizing_now() && g.queue->host_alive()) g.queue->mark_host_dead();
}

int deliver_deferred_interrupt() {
  if (g_cleanup_depth > 0 || g_def_type == nullptr) return 0;
  g.deferred_interrupts.fetch_add(1, std::memory_order_relaxed);  // statistics only
  PyErr_Restore(g_def_type, g_def_value, g_def_tb);
  g_def_type = g_def_value = g_def_tb = nullptr;
  return -1;
}

}  // namespace deferred_cleanup::cpython::detail

using namespace deferred_cleanup;
using namespace deferred_cleanup::cpython::detail;

extern "C" {

dc_host* dc_host_get(const dc_host_options* opts) {
  if (g.queue != nullptr) return reinterpret_cast<dc_host*>(&g);
  if (PyInterpreterState_Get() != PyInterpreterState_Main()) {
    PyErr_SetString(PyExc_ImportError, "deferred_cleanup: the host needs the main interpreter");
    return nullptr;
  }
  unsigned long ident = 0;
  if (main_thread_ident(&ident) == nullptr) return nullptr;
  if (PyThread_get_thread_ident() != ident) {
    PyErr_SetString(PyExc_RuntimeError, "deferred_cleanup: dc_host_get() off the main thread");
    return nullptr;
  }
  g.main_ident = ident;
  if (opts != nullptr) g.opts = *opts;
  auto* q = new (std::nothrow) Queue(&g_core_host);
  if (q == nullptr) {
    PyErr_NoMemory();
    return nullptr;
  }
  const std::int64_t wait = g.opts.exit_wait_ns;
  q->settings.exit_wait_ns.store(wait == 0 ? kDefaultExitWaitNs : (wait < 0 ? 0 : wait),
                                 std::memory_order_relaxed);  // a setting
  g.queue = q;  // main thread; threads started later see it (thread creation orders it)
  if (register_exit() != 0 || register_fork() != 0) return nullptr;
  return reinterpret_cast<dc_host*>(&g);
}

dc_item* dc_item_new(dc_cleanup_fn cleanup, void* payload) {
  if (cleanup == nullptr) return nullptr;  // no item without a cleanup (deferred_cleanup.h)
  auto* it = static_cast<dc_item*>(std::malloc(sizeof(dc_item)));
  if (it == nullptr) return nullptr;
  init_item(it->core, it, &item_cleanup);
  it->fn = cleanup;
  it->payload = payload;
  return it;
}

void dc_item_discard(dc_item* item) { std::free(item); }

void* dc_item_payload(const dc_item* item) { return item != nullptr ? item->payload : nullptr; }

int dc_hand_off(dc_host* host, dc_item* item) {
  // Refused, untouched, when either is not this extension's: plain reads
  // only (no allocation, no lock, no Python), so also after finalization.
  if (item == nullptr || host != reinterpret_cast<dc_host*>(&g)) return -1;
  g.handed_off.fetch_add(1, std::memory_order_relaxed);  // statistics only
  if (!g.queue->accepting()) g.handed_off_late.fetch_add(1, std::memory_order_relaxed);  // stats
  on_user_object_destroyed(*g.queue, &item->core);
  return 0;
}

int dc_entry(dc_host*) {
  note_finalizing();
  drain_at_entry(*g.queue);
  return is_main_thread() ? deliver_deferred_interrupt() : 0;
}

int64_t dc_drain_now(dc_host*) {
  note_finalizing();
  const DrainNowResult r = drain_now(*g.queue);
  switch (r.status) {
    case DrainNowStatus::not_main_thread:
      PyErr_SetString(PyExc_RuntimeError, "dc_drain_now: cleanups run on the main thread only");
      return -1;
    case DrainNowStatus::host_dead:
      PyErr_SetString(PyExc_RuntimeError, "dc_drain_now: the host is dead (finalizing)");
      return -1;
    case DrainNowStatus::nested:
      PyErr_SetString(PyExc_RuntimeError, "dc_drain_now: called from inside a cleanup");
      return -1;
    case DrainNowStatus::drained:
      break;
  }
  if (deliver_deferred_interrupt() != 0) return -1;
  return static_cast<int64_t>(r.cleaned);
}

void dc_get_counters(const dc_host*, dc_counters* out) {
  const Queue& q = *g.queue;
  auto r = [](const std::atomic<std::uint64_t>& a) {
    return a.load(std::memory_order_relaxed);  // statistics only
  };
  *out = dc_counters{};
  out->handed_off = r(g.handed_off);
  out->handed_off_late = r(g.handed_off_late);
  out->cleaned = r(q.stats.cleaned);
  out->cleaned_off_main = r(g.cleaned_off_main);
  out->pending_calls = r(q.stats.pending_calls);
  out->direct_drains = r(q.stats.direct_drains);
  out->deferred_interrupts = r(g.deferred_interrupts);
  out->unraisable = r(g.unraisable);
  out->leaked_at_exit = r(q.stats.leaked_at_shutdown);
  out->exit_sequence_ran = g.exit_ran ? 1 : 0;
  out->host_alive = q.host_alive() ? 1 : 0;
}

}  // extern "C"
