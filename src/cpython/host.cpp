// SPDX-License-Identifier: Apache-2.0
//
// host.cpp: the CPython host while the interpreter lives (see
// host_internal.hpp for the split).  The rules are the reference module's
// (reference/src/host.cpp), on the plain C API, for one queue of the
// reference policy per extension.
//
// The interrupt rule is interrupt.hpp's, shared with the reference module:
// the first KeyboardInterrupt/SystemExit of a drain stops it and is raised
// where the outermost drain was entered (the pending call, dc_entry(),
// dc_drain_now() return -1 with it set; in CPython's exit-time flush the
// exit sequence raises it); later ones go to sys.unraisablehook.
#include <pthread.h>

#include <chrono>
#include <cstdlib>
#include <new>

#include "host_internal.hpp"

namespace deferred_cleanup::cpython::detail {

State g;

namespace {

InterruptCounters make_interrupt_counters();
InterruptRule g_interrupts{make_interrupt_counters()};

int trampoline(void* arg);

int host_add_pending_call(PendingCallFn, void* arg) {
  enter_host_call(g.in_host);  // announces us to the backstop's wait (host_threads.hpp)
  // Py_AddPendingCall needs no thread state (Python/ceval_gil.c, v3.12.0).
  const int rc = Py_AddPendingCall(&trampoline, arg);
  leave_host_call(g.in_host);
  return rc;
}

// The interrupt rule (interrupt.hpp), counted into this host's statistics.
InterruptCounters make_interrupt_counters() {
  InterruptCounters c;
  c.delivered = &g.deferred_interrupts;
  c.unraisable = &g.unraisable;
  c.held_at_flush = &g.interrupts_held_at_flush;
  return c;
}

/// Host::after_drain (the pending call's return value): the interrupt rule's.
/// Main thread, GIL held.
int host_after_drain() { return g_interrupts.after_drain(); }

/// Host::stop_drain: the interrupt rule's; the exit sequence never stops
/// early.  Main thread, GIL held.
bool host_stop_drain() { return g_interrupts.stop_drain(g.exit_sequence_running); }

/// The Host the core calls (C++17: no designated initializers).
Host make_core_host() {
  Host h;
  h.add_pending_call = &host_add_pending_call;
  h.is_main_thread = &is_main_thread;
  h.now_ns = &now_ns;
  h.after_drain = &host_after_drain;
  h.stop_drain = &host_stop_drain;  // in_gate and finalizing stay nullptr
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

/// The core's cleanup of every item: the user's cleanup with the current
/// exception saved around it, then the rule, then free the item.
void item_cleanup(void* arg) noexcept {
  auto* it = static_cast<dc_item*>(arg);
  if (!is_main_thread()) g.cleaned_off_main.fetch_add(1, std::memory_order_relaxed);  // stats
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  g_interrupts.begin_cleanup();
  it->fn(it->payload);
  if (PyErr_Occurred()) g_interrupts.report(nullptr);  // kept, or sys.unraisablehook
  g_interrupts.end_cleanup();
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

void note_finalizing() {
  if (g.queue != nullptr && finalizing_now() && g.queue->host_alive()) g.queue->mark_host_dead();
}

int deliver_deferred_interrupt() { return g_interrupts.deliver(); }

void report_host_error() { g_interrupts.report(nullptr); }

InterruptRule& interrupts() { return g_interrupts; }

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
  out->interrupts_held_at_flush = r(g.interrupts_held_at_flush);
}

}  // extern "C"
