/* SPDX-License-Identifier: Apache-2.0
 *
 * deferred_cleanup.h: the C API of the CPython host of deferred-cleanup.
 *
 * Hand cleanup work from any thread (a thread-pool completion, a driver
 * callback, another runtime's garbage collector) to the CPython main thread,
 * where it runs with the GIL held.  For C, Cython (deferred_cleanup.pxd
 * beside this file) and Rust (bindgen) users.  The types are opaque; the
 * library (the .cpp files of src/cpython/, CMake target deferred_cleanup::cpython) is
 * compiled into the user's extension, one host per extension.
 *
 * The life of an item:
 *   dc_item_new()        preallocate, with a cleanup function and its payload
 *   dc_hand_off()        from any thread: queue it; allocates nothing, never
 *                        blocks, safe after finalization (then never run)
 *   (main thread)        the cleanup runs once, GIL held, from a pending call
 *                        (Py_AddPendingCall) or an entry-point drain; the
 *                        host frees the item afterwards
 *
 * Building: link the CMake target deferred_cleanup::cpython.  Its sources are C++17:
 * a target that links it in a directory without CXX stops the configure with one message
 * that says to enable CXX.
 * Those sources alone are compiled with -fvisibility=hidden (GCC, Clang);
 * the extension's own sources keep their visibility.
 *
 * fork(): the host's child handler (os.register_at_fork) schedules a drain
 * of the items the child inherited, so:
 * an item queued at the fork is cleaned in the parent and in the child,
 * each on its own copy of the payload.  The count outstanding() reads is the
 * child's copy of the parent's: reset it in an after_in_child handler of your own,
 * or the child's exit step 0 waits the full exit_wait_ns for it.
 */
#ifndef DEFERRED_CLEANUP_CPYTHON_DEFERRED_CLEANUP_H
#define DEFERRED_CLEANUP_CPYTHON_DEFERRED_CLEANUP_H

#include <Python.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The extension's host (opaque; one per extension, never freed). */
typedef struct dc_host dc_host;
/* A preallocated unit of cleanup work (opaque). */
typedef struct dc_item dc_item;

/* A cleanup.  Thread: the main thread, GIL held, exactly once per item handed
 * off (never for an item discarded or handed off after the host died).
 * Errors: it may leave a Python exception set: KeyboardInterrupt and
 * SystemExit (the first of a drain) are raised after the drain where it was
 * entered (the interrupted code, or the entry point's caller); any other, and
 * later interrupts of the same drain, go to sys.unraisablehook.  The other
 * items of the drain still run.  It must not free the item.
 * Early stop: after each cleanup the host runs CPython's signal handlers
 * (PyErr_CheckSignals), and the first KeyboardInterrupt or SystemExit
 * stops the drain early and is raised at once:
 * at most the one cleanup running when Ctrl-C arrives finishes first.
 * The cleanups not yet run go back on the queue, in their order,
 * with a pending call re-armed for them: each still runs exactly once.
 * The exit sequence's drains never stop early, nor does a drain inside a
 * cleanup.  In CPython's exit-time flush, where no Python frame runs,
 * the interrupt is held for the exit sequence, never a SystemError: on
 * 3.10-3.13 a pending call's -1 there becomes one, so the pending call
 * returns 0 and the exit sequence raises the interrupt in the atexit phase.
 * Source: PyErr_CheckSignals, Doc/c-api/exceptions.rst; _Py_FinishPendingCalls,
 * Python/ceval.c (v3.10.0, v3.11.0) and Python/ceval_gil.c (v3.12.0, v3.13.0). */
typedef void (*dc_cleanup_fn)(void* payload);

/* Options of dc_host_get().  Zero-initialise, then set what you need. */
typedef struct dc_host_options {
  /* Step 0 of the exit sequence waits, draining, while outstanding(ctx)
   * returns non-zero (work the user expects to be handed off soon), at most
   * exit_wait_ns nanoseconds (0: the default, 5 s; negative: no wait).
   * outstanding: called on the main thread with the GIL held; NULL: only
   * queued items are waited for.  It may call Python; an exception it
   * leaves set counts as nothing due, outstanding is not called again, and
   * the exception goes to sys.unraisablehook (a KeyboardInterrupt or
   * SystemExit is raised at the end of the exit sequence instead), so the
   * error state is clear when CPython finalizes.
   * Ctrl-C during the wait: CPython's signal handlers run between two of its
   * 0.5 ms sleeps, and a KeyboardInterrupt or SystemExit they raise
   * ends the wait; the rest of the exit sequence still runs and raises it at
   * its end, where CPython reports it as an exception of an atexit callback
   * (Modules/atexitmodule.c, atexit_callfuncs, v3.10.0).  One a cleanup
   * raises does not end the wait: it is raised at the end the same way (a
   * later one goes to sys.unraisablehook), and what becomes due within
   * exit_wait_ns is still cleaned. */
  int64_t exit_wait_ns;
  uint64_t (*outstanding)(void* ctx);
  void* outstanding_ctx;
} dc_host_options;

/* Counters: relaxed snapshots, statistics only (they order nothing). */
typedef struct dc_counters {
  uint64_t handed_off;          /* dc_hand_off() calls */
  uint64_t handed_off_late;     /* of those, after the exit sequence closed the queue */
  uint64_t cleaned;             /* cleanups run */
  uint64_t cleaned_off_main;    /* of those, not on the main thread (always 0) */
  uint64_t pending_calls;       /* Py_AddPendingCall accepted */
  uint64_t direct_drains;       /* drains run by dc_entry()/dc_drain_now() */
  uint64_t deferred_interrupts; /* KeyboardInterrupt/SystemExit raised after a drain */
  uint64_t unraisable;          /* cleanup errors sent to sys.unraisablehook */
  uint64_t leaked_at_exit;      /* items still queued at the Py_AtExit backstop */
  int exit_sequence_ran;        /* the atexit-phase exit sequence has run */
  int host_alive;               /* cleanups may still run */
  /* KeyboardInterrupt/SystemExit held in CPython's exit-time flush for the
   * exit sequence to raise */
  uint64_t interrupts_held_at_flush;
} dc_counters;

/* Create (first call) or return this extension's host.
 * Thread: the main thread of the main interpreter, GIL held (a module's
 * exec/init function).  Blocking: imports atexit, threading and os.
 * Registers the atexit-phase exit sequence (3.10-3.13: after every other
 * atexit handler; 3.14+: here, so later handlers run before it), the
 * Py_AtExit backstop and the fork() child handler; a later call returns the
 * same host and ignores opts.
 * Memory ordering: the host is published before return; dc_hand_off() from
 * threads started afterwards sees it (thread creation orders it).
 * Errors: returns NULL with an exception set (ImportError outside the main
 * interpreter, RuntimeError off the main thread, MemoryError).
 * Source: Py_AddPendingCall, Py_AtExit (Doc/c-api/init.rst, sys.rst, v3.12.0);
 * os.register_at_fork (Modules/posixmodule.c, v3.7+). */
dc_host* dc_host_get(const dc_host_options* opts);

/* Preallocate an item.  Thread: any; no thread state needed.
 * Blocking: malloc only.  Memory ordering: none until dc_hand_off() publishes
 * it.
 * Errors: NULL, with no exception set, when out of memory or when cleanup is NULL
 * (no item is made without a cleanup to run).  payload may be NULL: it is
 * only passed back to the cleanup.
 * Source: this project (cuda-python PR #2371 preallocates the same way). */
dc_item* dc_item_new(dc_cleanup_fn cleanup, void* payload);

/* The payload an item was made with (NULL for a NULL item).  Thread: any,
 * while the item is the caller's: after dc_item_new() and before
 * dc_hand_off() or dc_item_discard() (e.g. to release the payload when the
 * work that would hand it off cannot start).  Never blocks, allocates
 * nothing.  Memory ordering: a plain read.  Errors: none.
 * Source: this project. */
void* dc_item_payload(const dc_item* item);

/* Free an item that was never handed off, without running its cleanup.
 * Thread: any.  Never blocks.  Memory ordering: none (never published).
 * Errors: none; NULL is ignored.  Source: this project. */
void dc_item_discard(dc_item* item);

/* Hand an item to the main thread.  Thread: any, with or without a thread
 * state, also during and after finalization.  Never blocks (except inside
 * CPython's pending-call lock, held for a few instructions), allocates
 * nothing, never calls into Python.  On success the item belongs to the host
 * from here.
 * Memory ordering: the push is seq_cst (a Treiber stack), so everything the
 * caller wrote before the call happens-before the cleanup; with the drain's
 * seq_cst clear-then-take no wakeup is lost.
 * Errors: returns 0 when the item was handed off,
 * -1 when item is NULL or host is not this extension's (NULL, or another's):
 * then nothing is queued or counted, no exception is set (there may be no
 * thread state) and a non-NULL item is still the caller's, to hand off again
 * or discard.  These checks are plain reads: the refusal is as non-blocking,
 * allocation-free and safe after finalization as the hand-off.
 * Once the exit sequence closed the queue, a handed-off item stays
 * queued: a main-thread entry point before finalization still runs it,
 * otherwise it is leaked (never touched, counted in leaked_at_exit).
 * Source: Py_AddPendingCall, Python/ceval_gil.c (v3.12.0); gh-95820. */
int dc_hand_off(dc_host* host, dc_item* item);

/* An API entry point: call it first in every function of your extension.
 * Thread: any thread holding the GIL (attached thread state).  On the main
 * thread it drains the queue directly (a pending call from a thread without
 * a thread state can starve while the main thread runs pure Python on
 * 3.10-3.12, gh-95820), elsewhere it re-schedules a pending call if needed.
 * Blocking: as long as the cleanups run.  Memory ordering: the drain's takes
 * are seq_cst.
 * Errors: 0, or -1 with the KeyboardInterrupt/SystemExit a cleanup raised
 * set (return NULL from your function then); the drain stopped after that
 * cleanup and the rest stays queued with a pending call re-armed.
 * Source: gh-95820; Python/ceval_gil.c make_pending_calls (v3.12.0). */
int dc_entry(dc_host* host);

/* Run every queued cleanup now.  Thread: the main thread, GIL held.
 * Blocking: as long as the cleanups run.  Memory ordering: as dc_entry().
 * Errors: the number of cleanups run, or -1 with an exception set:
 * RuntimeError off the main thread, after the host died, or from inside a
 * cleanup; or the KeyboardInterrupt/SystemExit a cleanup raised (the drain
 * stopped after that cleanup; the rest stays queued, a pending call re-armed).
 * Source: this project. */
int64_t dc_drain_now(dc_host* host);

/* Read the counters.  Thread: any.  Never blocks.  Memory ordering: relaxed
 * loads (a snapshot may mix moments).  Errors: none.  Source: this project. */
void dc_get_counters(const dc_host* host, dc_counters* out);

#ifdef __cplusplus
}
#endif

#endif /* DEFERRED_CLEANUP_CPYTHON_DEFERRED_CLEANUP_H */
