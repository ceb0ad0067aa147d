// SPDX-License-Identifier: Apache-2.0
//
// exit.cpp: the CPython host at interpreter exit.
//
//   atexit phase   the exit sequence: step 0, drain while the user's
//                  outstanding() says work is due or items are queued
//                  (bounded by exit_wait_ns); steps 1-3 (shutdown.hpp): close,
//                  wait out producers in the gate, final drain.  The host stays
//                  alive for main-thread drains until CPython finalizes (step
//                  4, note_finalizing).  Registered from C, last on 3.10-3.13
//                  (exit_phase.hpp).
//   Py_AtExit      the backstop: host dead, wait (bounded) for producers still
//                  inside Py_AddPendingCall, count the leaked items.  No
//                  Python API from there on.
#include <cstdio>

#include "deferred_cleanup/shutdown.hpp"
#include "exit_phase.hpp"
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
  // 0. Drain while work is due, up to the exit wait (exit_phase.hpp, shared
  //    with the reference module): the GIL is released between drains so
  //    the user's threads (and Python threads) progress; a Ctrl-C (a
  //    KeyboardInterrupt/SystemExit from a signal handler run there) ends the
  //    wait, one a cleanup raises does not; steps 1-3 still run, and the
  //    first interrupt is raised at the end.
  g.exit_sequence_running = true;  // releases everything: no early stop (host_stop_drain)
  exit_wait(
      interrupts(), q.settings.exit_wait_ns.load(std::memory_order_relaxed),  // setting
      [](void* qp) {
        drain_all(*static_cast<Queue*>(qp));
        return work_due();
      },
      &q);
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
  // Late in the atexit phase: last on 3.10-3.13, at the position of the
  // import on 3.14+ (exit_phase.hpp, shared with the reference module).
  PyObject* sequence = PyCFunction_New(&g_sequence_def, nullptr);
  if (sequence == nullptr) return -1;
  const int rc = register_exit_sequence(sequence);
  Py_DECREF(sequence);
  return rc;
}

}  // namespace deferred_cleanup::cpython::detail
