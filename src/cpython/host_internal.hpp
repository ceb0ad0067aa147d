// SPDX-License-Identifier: Apache-2.0
//
// host_internal.hpp: what the CPython host library's files share (not
// installed as API).  Everything here has internal linkage in practice: the
// library is compiled into the user's extension with -fvisibility=hidden.
//
//   host.cpp  the pending-call trampoline, finalizing -> host dead, the
//             host's interrupt rule (an InterruptRule), items, entry points,
//             the C API
//   exit.cpp  the atexit-phase exit sequence (step 0 and steps 1-3) and its
//             registration, the Py_AtExit backstop
//   fork.cpp  the fork() child handler
//   runtime.cpp  the finalizing check and the frame test, shared with the
//             reference module (runtime.hpp)
//   interrupt.cpp  the interrupt rule, shared with the reference module
//             (interrupt.hpp)
//   host_threads.cpp  producers inside Py_AddPendingCall, the backstop's
//             wait, the fork reset, shared with the reference module
//             (host_threads.hpp)
#pragma once

#include <Python.h>

#include <atomic>
#include <cstdint>

#include "deferred_cleanup/cpython/deferred_cleanup.h"
#include "deferred_cleanup/callback.hpp"
#include "deferred_cleanup/drain.hpp"
#include "deferred_cleanup/queue.hpp"
#include "deferred_cleanup/scheduling.hpp"
#include "host_threads.hpp"
#include "interrupt.hpp"
#include "runtime.hpp"

struct dc_item {
  deferred_cleanup::DeferredCleanupItem core;  // first: the core's intrusive link
  dc_cleanup_fn fn;
  void* payload;
};

namespace deferred_cleanup::cpython::detail {

using Queue = ReferenceQueue;

/// The host state of this extension (one; static storage, never freed).
struct State {
  Queue* queue = nullptr;  // published by dc_host_get (main thread, GIL)
  dc_host_options opts{};
  unsigned long main_ident = 0;           // PyThread_get_thread_ident of the main thread
  std::atomic<bool> torn_down{false};     // the Py_AtExit backstop ran (seq_cst)
  std::atomic<std::uint32_t> in_host{0};  // producers inside Py_AddPendingCall (seq_cst)
  bool exit_ran = false;                  // main thread (GIL)
  bool in_pending_call = false;           // main thread (GIL)
  bool exit_sequence_running = false;     // main thread (GIL): drains do not stop early
  // Statistics (relaxed).
  std::atomic<std::uint64_t> handed_off{0}, handed_off_late{0}, cleaned_off_main{0},
      deferred_interrupts{0}, unraisable{0}, interrupts_held_at_flush{0};
};
extern State g;

bool is_main_thread();
std::int64_t now_ns();
/// Once CPython is finalizing: mark the host dead (step 4).  Any thread.
void note_finalizing();
/// The first KeyboardInterrupt/SystemExit a cleanup raised, set as the
/// current exception; returns -1 then, else 0.  Main thread, GIL held.
/// Delivers nothing inside a cleanup (the outermost drain does).
int deliver_deferred_interrupt();
/// The exception set now, raised by the host's own call into user code (the
/// user's outstanding()) or by a signal handler: the interrupt rule's report
/// (a first KeyboardInterrupt/SystemExit is kept, anything else goes to
/// sys.unraisablehook); the error state is clear afterwards.  Main thread,
/// GIL held, an exception set.
void report_host_error();
/// The host's interrupt rule (static storage), for the shared exit wait
/// (exit_phase.hpp).  Main thread, GIL held.
InterruptRule& interrupts();
/// exit.cpp: register the atexit-phase sequence and the Py_AtExit backstop.
/// Main thread, GIL held.  Returns -1 with an exception set on error.
int register_exit();
/// fork.cpp: register the fork() child handler.  Main thread, GIL held.
int register_fork();

}  // namespace deferred_cleanup::cpython::detail
