// SPDX-License-Identifier: Apache-2.0
//
// exit_phase.hpp: the two parts of a CPython host's atexit-phase exit
// sequence that every host built on this library shares (not installed as
// API; hidden visibility): where the sequence is registered (its order
// among the atexit handlers) and step 0, the bounded exit wait.  Used by the
// library's host (exit.cpp) and the reference module's
// (reference/src/exit.cpp, reference/python/deferred_cleanup/__init__.py).
#pragma once

#include <Python.h>

#include <cstdint>

#include "interrupt.hpp"

namespace deferred_cleanup::cpython::detail {

/// Registers `sequence` (a callable, no arguments; a strong reference is
/// kept for the process's lifetime) to run late in the Python atexit phase.
/// 3.10-3.13: a threading._register_atexit callback (those run in
/// threading._shutdown, before the atexit handlers) registers a hook with
/// atexit, so it is the last registered and runs first; the hook runs every
/// other handler itself (atexit._run_exitfuncs, which calls each once and
/// empties the list; the nested call of the hook returns at once), then
/// `sequence`, once.  An exception that ends threading._shutdown before that
/// callback runs (Ctrl-C, or a cleanup's KeyboardInterrupt from a drain in
/// _shutdown) skips it: a fallback, a plain atexit handler registered at the
/// call, then runs `sequence` at the position of the call, as on 3.14+ (it
/// does nothing when the callback ran).  3.14+ (the atexit module runs its handlers from a copy
/// of its list, so a nested _run_exitfuncs would run each twice), or where
/// threading._register_atexit is missing or refuses: a plain
/// atexit.register(sequence) at the position of the call.  Thread: main
/// thread, GIL held (module import).  Blocking: never (imports atexit and
/// threading).  Memory ordering: none (GIL).  Errors: -1 with the Python
/// exception set, else 0.  Source: Lib/threading.py (_register_atexit,
/// _shutdown, v3.9+: the callbacks run in turn with no try),
/// Python/pylifecycle.c (wait_for_thread_shutdown, v3.12.0: _shutdown's
/// exception goes to sys.unraisablehook), Modules/atexitmodule.c (v3.12.0
/// live list; v3.14.0 copy).
int register_exit_sequence(PyObject* sequence) noexcept;

/// One drain of step 0: drains what is queued, then returns whether work is
/// still due (the wait goes on).  Called with the GIL held, main thread.
using DrainAndDue = bool (*)(void* ctx);

/// Step 0 of the exit sequence, the exit wait: calls `drain_and_due(ctx)`
/// until it returns false, a signal handler it runs raises an interrupt, or
/// `bound_ns` (ns, steady clock) has passed since the call; between two
/// calls it sleeps 0.5 ms with the GIL released (so the user's threads, and
/// Python threads a cleanup waits on, progress) and then runs CPython's
/// signal handlers: a KeyboardInterrupt/SystemExit one raises (Ctrl-C) is
/// kept by `rule` (rule.report) and ends the wait; the caller runs the rest
/// of its exit sequence and raises it at the end (rule.deliver).  Any other
/// exception a handler raises goes to sys.unraisablehook.  A cleanup's
/// KeyboardInterrupt/SystemExit does not end the wait (the drains report it
/// to `rule`): what becomes due within the bound is still released.  Thread: main thread, GIL
/// held; not during finalization (the GIL is released and taken again).
/// Blocking: up to `bound_ns` plus one drain.  Memory ordering: none of its
/// own (the drains' are theirs).  Errors: none; returns with no exception
/// set.  Source: PyErr_CheckSignals, Doc/c-api/exceptions.rst (v3.12.0):
/// signal handlers run only on the main thread, when it checks.
void exit_wait(InterruptRule& rule, std::int64_t bound_ns, DrainAndDue drain_and_due,
               void* ctx) noexcept;

}  // namespace deferred_cleanup::cpython::detail
