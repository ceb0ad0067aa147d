# SPDX-License-Identifier: Apache-2.0
"""The expected CPython pending-call facts: ONE table, keyed by field and version range.

Every other part of the project (the probe report, ``tests/test_probe.py`` and
any test that needs a CPython fact) imports its expectations from here instead
of hard-coding them.  Each row carries its citation: the CPython file, the
constant or function, the tag it was read from, and the gh/bpo issue where one
exists.  ``notes/cpython-pending-calls.md`` explains every row at length.

The values were read from CPython's sources first and then confirmed by the
probe (``python -m deferred_cleanup.probe``) on every interpreter of the
matrix; a row is never a copy of the probe's output.

Interface::

    expected(field: str, version: tuple[int, int] = sys.version_info[:2]) -> value
    assumed(field, version) -> (value, newer)   # newest row for a newer version
    FIELDS: tuple[str, ...]     # every field, in table order
    rows(field) -> list[Fact]   # the rows of one field

Field names (a "foreign thread" is a native thread with no Python thread
state; "full" means the queue refused an add):

``capacity`` (int)
    How many ``Py_AddPendingCall`` calls from a foreign thread succeed while
    the main thread holds the GIL in C and cannot run them.
``full.returns`` (int)
    What the first refused ``Py_AddPendingCall`` returns.
``full.returns_again`` (int)
    What a second add into the still-full queue returns (refusal is stable:
    nothing was evicted to make room).
``full.main_thread_returns`` (int)
    What an add from the main thread (with a thread state) returns when full.
``full.exception_set`` (bool)
    Whether a refusal sets a Python exception (checked on the main thread
    after both the foreign and the main-thread refusal).
``full.evicted`` (bool)
    Whether any accepted call was lost when the queue filled.
``full.run_order`` (str: ``"fifo"`` / ``"lifo"`` / ``"other"``)
    The order in which the accepted calls then run.
``full.refused_runs`` (bool)
    Whether a refused call ever runs.
``breaker.batch`` (int)
    How many queued calls run at one eval-breaker check (queue full).
``breaker.batch_all`` (bool)
    Whether that one check ran the whole queue.
``exception.surfaces`` (str: ``"python-frame"`` / ``"unraisable"`` / ``"none"``)
    Where the exception of a pending call that returns -1 shows up.
``exception.rest_kept`` (bool)
    Whether the calls queued behind the failing one are kept and run.
``exception.rest_when`` (str: ``"same-check"`` / ``"later-check"`` / ``"never"`` / ``"mixed"``)
    Whether they run in the same pass (with the exception still set) or at a
    later eval-breaker check.
``delay.busy_python`` (str: ``"ran"`` / ``"starved"``)
    A foreign-thread add while the main thread spins in pure Python; starved
    = not run within ``probe.STARVED_AFTER_MS`` (gh-95820).
``delay.sleep`` (str: ``"during-sleep"`` / ``"after-sleep"`` / ``"starved"``)
    The same with the main thread in ``time.sleep``.
``delay.c_call`` (str: ``"during-call"`` / ``"after-call"`` / ``"starved"``)
    The same with the main thread in a C call that releases the GIL.
``runner.main_busy`` (str: ``"main"`` / ``"other"`` / ``"none"``)
    The thread that runs a foreign-thread call while the main thread spins in
    Python and a second Python thread spins too.
``runner.main_sleeping`` (str)
    The same while the main thread sleeps and the second thread spins.
``subinterp.runner`` (str: ``"main"`` / ``"sub"`` / ``"lost"`` / ``"n/a: why"``)
    Which interpreter runs a call a foreign thread added while a legacy
    subinterpreter (``Py_NewInterpreter``) ran a pure-Python loop on the main
    thread; ``"lost"``: it never ran, not even after ``Py_MakePendingCalls``
    in the main interpreter.
``fork.queued_calls_in_child`` (str: ``"run"`` / ``"lost"`` / ``"partial"`` / ``"child-failed"``)
    Whether a child forked (as :func:`os.fork` does) right after a foreign
    thread queued calls runs those calls at its first ``Py_MakePendingCalls``:
    the calls queued before ``fork()`` survive in the child's ring.
``atexit.finalizing`` (bool)
    ``Py_IsFinalizing()`` (``_Py_IsFinalizing()`` before 3.13) inside a
    Python ``atexit`` handler.
``atexit.foreign_add_runs`` (bool)
    Whether a call a foreign thread added from inside that handler ever runs.
``atexit.main_add_runs`` (bool)
    Whether a call the handler added itself (main thread) ever runs.
``py_atexit.initialized`` (bool)
    ``Py_IsInitialized()`` inside a ``Py_AtExit`` callback.
``after_finalize.outcome`` (str: ``"crash"`` / ``"no-op"`` / ``"ran"``)
    What ``Py_AddPendingCall`` from a foreign thread does after
    ``Py_FinalizeEx`` has returned (in a child process, from a C ``atexit``
    handler).
``after_finalize.signal`` (str)
    The signal that killed that child, or ``"none"``.
``after_finalize.returns`` (int or None)
    What that ``Py_AddPendingCall`` returned (None when it crashed).
``exit_flush.error`` (str: ``"SystemError"`` / ``"exception"`` / ``"silent"`` / ...)
    How CPython reports a pending call that returns -1 with an exception set
    in its exit-time flush (``_Py_FinishPendingCalls``, no Python frame): in
    a child process whose ``threading._shutdown`` is wrapped by a C function
    that adds the call from the main thread as the last thing before the
    flush.  ``"SystemError"``: the call's exception is printed chained to a
    SystemError ("bad argument to internal function"); ``"exception"``: only
    the call's own exception is printed; ``"silent"``: neither;
    ``"ran-in-frame"`` / ``"not-run"``: the construction failed (the call ran
    inside Python code, or never).

PEP 788 fields (``"absent"`` on every version without ``PyInterpreterGuard``,
i.e. before 3.15); the view is made at import with
``PyInterpreterView_FromMain()``, the calls come from a foreign thread:

``pep788.guard_from_foreign`` (bool)
    ``PyInterpreterGuard_FromView(view)`` returns a guard.
``pep788.guard_allocs`` (int)
    Allocations made inside that one call, all allocator domains together.
``pep788.guard_alloc_domain`` (str)
    The domains they came from: ``"raw"`` / ``"mem"`` / ``"obj"`` joined by ``+``, or
    ``"none"``.
``pep788.guard_in_atexit`` (bool)
    A guard is granted inside the last Python ``atexit`` handler.
``pep788.guard_in_py_atexit`` (bool)
    A guard is granted inside a ``Py_AtExit`` callback.
``pep788.guard_while_finalizing`` (bool)
    ``Py_IsFinalizing()`` was ever true while a polling thread held a guard
    during finalization.
``pep788.finalize_waits_for_guard`` (bool)
    Finalization went past the guard point only after a guard taken in the
    atexit phase was closed (the poller's first refusal came after the close).
``pep788.pending_call_under_guard`` (str: ``"ran"`` / ``"not-run"`` / ``"refused"``)
    What becomes of a ``Py_AddPendingCall`` that the guard's holder makes
    while ``Py_FinalizeEx`` waits for that guard.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

Version = tuple[int, int]


@dataclasses.dataclass(frozen=True)
class Fact:
    """One row: ``field`` has ``value`` on every CPython ``lo`` ≤ X.Y ≤ ``hi``.

    :param field: field name (str), see the module docstring.
    :param lo: first version, inclusive ((major, minor)).
    :param hi: last version, inclusive ((major, minor)).
    :param value: the expected value (int, bool, str or None).
    :param cite: where the fact comes from (str): file, function or
        constant, tag, gh/bpo.
    """

    field: str
    lo: Version
    hi: Version
    value: Any
    cite: str


# Short names for the sources cited below (the tags the text was read from).
_CEVAL_310 = "Python/ceval.c (v3.10.0, v3.11.0)"
_GIL_312 = "Python/ceval_gil.c (v3.12.0)"
_GIL_313 = "Python/ceval_gil.c (v3.13.0, v3.14.0, main for 3.15)"
_PYLIFE = "Python/pylifecycle.c Py_FinalizeEx/_Py_Finalize (v3.10.0 … v3.14.0)"
_PYSTATE_315 = "Python/pystate.c (v3.15.0rc1)"
_PYLIFE_315 = "Python/pylifecycle.c (v3.15.0rc1)"
_ALL = ((3, 10), (3, 15))
_OLD = ((3, 10), (3, 12))
_NEW = ((3, 13), (3, 15))

TABLE: tuple[Fact, ...] = (
    # ---- 1. capacity
    Fact(
        "capacity",
        *_OLD,
        31,
        "Include/internal/pycore_interp.h (v3.10.0, v3.11.0) and "
        "Include/internal/pycore_ceval_state.h (v3.12.0): "
        "NPENDINGCALLS = 32; " + _CEVAL_310 + " / " + _GIL_312 + " _push_pending_call refuses when "
        "(last + 1) % NPENDINGCALLS == first, so a ring of 32 keeps one slot free",
    ),
    Fact(
        "capacity",
        *_NEW,
        32,
        "Include/internal/pycore_ceval_state.h (v3.13.0, v3.14.0): MAXPENDINGCALLS_MAIN = 32 is "
        "the max of "
        "_PyRuntime.ceval.pending_mainthread; "
        + _GIL_313
        + " _push_pending_call refuses when npending == max "
        "(counted, no free slot kept); gh-104812 (PR #104813) made Py_AddPendingCall target "
        "pending_mainthread",
    ),
    # ---- 2. behaviour when full
    Fact(
        "full.returns",
        *_ALL,
        -1,
        "Py_AddPendingCall returns -1 when _push_pending_call refuses: "
        + _CEVAL_310
        + ", "
        + _GIL_312
        + "; "
        + _GIL_313
        + " maps _Py_ADD_PENDING_FULL to -1; Doc/c-api/init.rst Py_AddPendingCall",
    ),
    Fact(
        "full.returns_again",
        *_ALL,
        -1,
        "_push_pending_call never removes an entry to make room ("
        + _CEVAL_310
        + ", "
        + _GIL_312
        + ", "
        + _GIL_313
        + "), so the queue stays full until the main thread pops",
    ),
    Fact(
        "full.main_thread_returns",
        *_ALL,
        -1,
        "the same _push_pending_call path whatever the calling thread: "
        + _CEVAL_310
        + " _PyEval_AddPendingCall, "
        + _GIL_312
        + " and "
        + _GIL_313
        + " _PyEval_AddPendingCall",
    ),
    Fact(
        "full.exception_set",
        *_ALL,
        False,
        "the comment above _push_pending_call in "
        + _CEVAL_310
        + " / "
        + _GIL_312
        + " / "
        + _GIL_313
        + ": a refused registration returns -1 without setting an exception (no PyErr_* call on "
        "that path)",
    ),
    Fact(
        "full.evicted",
        *_ALL,
        False,
        "_push_pending_call writes only at the tail and only when there is room ("
        + _CEVAL_310
        + ", "
        + _GIL_312
        + ", "
        + _GIL_313
        + ")",
    ),
    Fact(
        "full.run_order",
        *_ALL,
        "fifo",
        "_pop_pending_call takes calls[first] and advances first ("
        + _CEVAL_310
        + ", "
        + _GIL_312
        + ", "
        + _GIL_313
        + "): a ring read from the head",
    ),
    Fact(
        "full.refused_runs",
        *_ALL,
        False,
        "a refused call is never stored ("
        + _CEVAL_310
        + ", "
        + _GIL_312
        + ", "
        + _GIL_313
        + " _push_pending_call)",
    ),
    # ---- 6. calls per eval-breaker check
    Fact(
        "breaker.batch",
        *_OLD,
        31,
        _CEVAL_310
        + " / "
        + _GIL_312
        + " make_pending_calls: one pass loops up to NPENDINGCALLS (32) pops, "
        "more than the 31 a full ring holds, so one check runs the whole queue",
    ),
    Fact(
        "breaker.batch",
        *_NEW,
        32,
        _GIL_313
        + " _make_pending_calls: maxloop = MAXPENDINGCALLSLOOP_MAIN = 0 means 'max' (32) for "
        "pending_mainthread (Include/internal/pycore_ceval_state.h v3.13.0), so one check runs all "
        "32",
    ),
    Fact(
        "breaker.batch_all",
        *_ALL,
        True,
        "see breaker.batch: the per-pass bound is at least the capacity on every version",
    ),
    # ---- 5. a pending call that fails
    Fact(
        "exception.surfaces",
        *_ALL,
        "python-frame",
        "the eval loop's eval-breaker handler ("
        + _CEVAL_310
        + " eval_frame_handle_pending; Python/ceval_gil.c "
        "_Py_HandlePending v3.12.0, v3.13.0) returns -1 and the loop jumps to its error label: the "
        "exception is "
        "raised in the Python frame running at the check",
    ),
    Fact(
        "exception.rest_kept",
        *_ALL,
        True,
        "make_pending_calls stops at the first failure without dropping the rest and signals "
        "pending calls "
        "again ("
        + _CEVAL_310
        + " SIGNAL_PENDING_CALLS on error; "
        + _GIL_313
        + " signal_pending_calls "
        "'play it safe')",
    ),
    Fact(
        "exception.rest_when",
        *_ALL,
        "later-check",
        "see exception.rest_kept: "
        + _CEVAL_310
        + " make_pending_calls / "
        + _GIL_313
        + " _make_pending_calls "
        "return -1 right after the failing call, so the remaining calls run at the next "
        "eval-breaker check, "
        "after the exception was raised",
    ),
    # ---- 4. delay
    Fact(
        "delay.busy_python",
        *_OLD,
        "starved",
        "gh-95820 (open for 3.10-3.12): since bpo-40010 (PR #19091, 3.9) SIGNAL_PENDING_CALLS "
        "recomputes "
        "eval_breaker with _Py_ThreadCanHandlePendingCalls() of the calling thread, false on a "
        "foreign thread ("
        + _CEVAL_310
        + ", "
        + _GIL_312
        + " COMPUTE_EVAL_BREAKER), so nothing wakes a main thread that never "
        "drops the GIL",
    ),
    Fact(
        "delay.busy_python",
        *_NEW,
        "ran",
        _GIL_313
        + " _PyEval_AddPendingCall sets _PY_CALLS_TO_DO_BIT directly on _PyRuntime.main_tstate's "
        "eval_breaker (per-thread eval breaker, gh-112175 PR #115194; flags merged by gh-109369 PR "
        "#109846)",
    ),
    Fact(
        "delay.sleep",
        *_ALL,
        "after-sleep",
        "time.sleep releases the GIL; on re-taking it the main thread recomputes its eval breaker "
        "(Python/ceval_gil.h "
        "v3.10.0, v3.11.0 and "
        + _GIL_312
        + " take_gil: COMPUTE_EVAL_BREAKER, bpo-40010; "
        + _GIL_313
        + " take_gil: update_eval_breaker_for_thread, gh-112175), so the call runs right after the "
        "sleep, "
        "never during it",
    ),
    Fact(
        "delay.c_call",
        *_ALL,
        "after-call",
        "same take_gil path as delay.sleep: Py_END_ALLOW_THREADS re-takes the GIL "
        "(Python/ceval_gil.h v3.10.0, "
        "v3.11.0 and " + _GIL_312 + " take_gil; " + _GIL_313 + " update_eval_breaker_for_thread)",
    ),
    # ---- 3. who runs the calls
    Fact(
        "runner.main_busy",
        *_ALL,
        "main",
        _CEVAL_310
        + " make_pending_calls runs only on the main thread (_Py_ThreadCanHandlePendingCalls); "
        + _GIL_312
        + " and "
        + _GIL_313
        + " run pending_mainthread only when _Py_IsMainThread() "
        "(gh-104812 keeps Py_AddPendingCall main-thread-only)",
    ),
    Fact(
        "runner.main_sleeping",
        *_ALL,
        "main",
        "see runner.main_busy: "
        + _CEVAL_310
        + " _Py_ThreadCanHandlePendingCalls, "
        + _GIL_312
        + " and "
        + _GIL_313
        + " make_pending_calls: the other Python thread never takes a main-thread-only call; the "
        "call "
        "waits for the main thread to come back from its sleep",
    ),
    # ---- 8. subinterpreters
    Fact(
        "subinterp.runner",
        (3, 10),
        (3, 11),
        "lost",
        "Python/ceval.c v3.10.0/v3.11.0 Py_AddPendingCall asks _PyThreadState_GET() first "
        "(bpo-39984, PR #19066); "
        "in 3.10/3.11 that reads _PyRuntime.gilstate.tstate_current "
        "(Include/internal/pycore_pystate.h "
        "_PyRuntimeState_GetThreadState), the GIL holder's thread state, from any thread. While a "
        "subinterpreter "
        "holds the GIL the foreign add lands in the subinterpreter's queue; the add does not set "
        "its eval breaker "
        "(gh-95820), so a busy subinterpreter never runs it, and Py_EndInterpreter discards the "
        "queue",
    ),
    Fact(
        "subinterp.runner",
        (3, 12),
        (3, 15),
        "main",
        "Python/ceval_gil.c v3.12.0+ Py_AddPendingCall always uses _PyInterpreterState_Main() with "
        "the "
        "main-thread-only flag (gh-104812, PR #104813), and only the main interpreter's main "
        "thread drains "
        "pending_mainthread ("
        + _GIL_312
        + ", "
        + _GIL_313
        + " make_pending_calls); the thread state became "
        "thread-local in 3.12 (Include/internal/pycore_pystate.h v3.12.0 _PyThreadState_GET)",
    ),
    # ---- 7. finalization
    Fact(
        "atexit.finalizing",
        *_ALL,
        False,
        _PYLIFE
        + ": the Python atexit callbacks (call_py_exitfuncs in 3.10, _PyAtExit_Call from 3.11) run "
        "before _PyRuntimeState_SetFinalizing, which is what Py_IsFinalizing()/_Py_IsFinalizing() "
        "reads",
    ),
    Fact(
        "atexit.foreign_add_runs",
        *_OLD,
        False,
        _PYLIFE
        + " calls _Py_FinishPendingCalls before the atexit callbacks, never after; a foreign add "
        "does "
        "not set the eval breaker (gh-95820), so the handler's remaining bytecode does not run it "
        "either",
    ),
    Fact(
        "atexit.foreign_add_runs",
        *_NEW,
        True,
        "the foreign add sets the main thread's eval-breaker bit ("
        + _GIL_313
        + " _PyEval_AddPendingCall, "
        "gh-112175), so the handler's own next eval-breaker check runs it; "
        + _PYLIFE
        + " has no later _Py_FinishPendingCalls",
    ),
    Fact(
        "atexit.main_add_runs",
        *_ALL,
        True,
        "an add from the main thread sets the eval breaker ("
        + _CEVAL_310
        + " SIGNAL_PENDING_CALLS on the main "
        "thread; "
        + _GIL_313
        + "), so the handler's next eval-breaker check runs it before the handler returns",
    ),
    Fact(
        "py_atexit.initialized",
        *_ALL,
        False,
        _PYLIFE + ": runtime->initialized is cleared right after the atexit callbacks, and "
        "call_ll_exitfuncs "
        "(the Py_AtExit callbacks) runs at the very end",
    ),
    Fact(
        "after_finalize.outcome",
        *_OLD,
        "crash",
        "Python/ceval.c v3.10.0/v3.11.0 Py_AddPendingCall falls back to "
        "_PyRuntime.interpreters.main, NULL after "
        "finalization, and dereferences it in _PyEval_AddPendingCall; "
        + _GIL_312
        + " _PyEval_AddPendingCall "
        "dereferences the NULL _PyInterpreterState_Main() in SIGNAL_PENDING_CALLS",
    ),
    Fact(
        "after_finalize.outcome",
        *_NEW,
        "no-op",
        _GIL_313 + " _PyEval_AddPendingCall only touches static runtime state "
        "(_PyRuntime.ceval.pending_mainthread "
        "and the statically allocated main thread state's eval breaker); the call is queued and "
        "never run",
    ),
    Fact(
        "after_finalize.signal",
        *_OLD,
        "SIGSEGV",
        "see after_finalize.outcome: a NULL interpreter pointer dereference (release builds)",
    ),
    Fact("after_finalize.signal", *_NEW, "none", "see after_finalize.outcome"),
    Fact(
        "after_finalize.returns",
        *_OLD,
        None,
        "see after_finalize.outcome: the process dies inside Py_AddPendingCall (Python/ceval.c "
        "v3.10.0/v3.11.0, " + _GIL_312 + "), so there is no return value",
    ),
    Fact(
        "after_finalize.returns",
        *_NEW,
        0,
        _GIL_313
        + " _push_pending_call: the queue was drained by finalization, so the add succeeds",
    ),
    Fact(
        "exit_flush.error",
        *_ALL,
        "SystemError",
        "_Py_FinishPendingCalls turns a pending call's -1 into PyErr_BadInternalCall() chained to "
        "the call's exception and prints it ("
        + _CEVAL_310
        + "; "
        + _GIL_312
        + "; "
        + _GIL_313
        + "); "
        + _PYLIFE
        + " calls it right after wait_for_thread_shutdown (threading._shutdown), "
        "with no Python frame in between; on main for 3.15 make_pre_finalization_calls keeps "
        "that order",
    ),
    # ---- 8b. fork
    Fact(
        "fork.queued_calls_in_child",
        *_OLD,
        "run",
        "after fork the child re-initialises the pending-call lock and keeps the ring: "
        "_PyEval_ReInitThreads (Python/ceval.c v3.10.0, v3.11.0; Python/ceval_gil.c v3.12.0) "
        "re-inits pending->lock only, and _PyRuntimeState_ReInitThreads (Python/pystate.c "
        "v3.12.0) re-inits the locks of LOCKS_INIT, pending_mainthread.lock among them; "
        "PyOS_AfterFork_Child (Modules/posixmodule.c) calls both",
    ),
    Fact(
        "fork.queued_calls_in_child",
        *_NEW,
        "run",
        "_PyEval_ReInitThreads (Python/ceval_gil.c v3.13.0, v3.14.7, v3.15.0rc1) re-inits "
        "pending->mutex with _PyMutex_at_fork_reinit and _PyRuntimeState_ReInitThreads "
        "(Python/pystate.c v3.13.0, v3.14.7, v3.15.0rc1) the mutexes of LOCKS_INIT, "
        "pending_mainthread.mutex among them; neither touches first, next, npending or the "
        "slots",
    ),
    # ---- 9. PEP 788 interpreter guards (3.15+)
    *(
        Fact(
            f,
            (3, 10),
            (3, 14),
            "absent",
            "Include/pystate.h (v3.14.0) declares no PyInterpreterGuard; PEP 788 came with "
            "gh-149101 "
            "(Include/pystate.h v3.15.0rc1, 'PEP 788 -- Protection against interpreter "
            "finalization')",
        )
        for f in (
            "pep788.guard_from_foreign",
            "pep788.guard_allocs",
            "pep788.guard_alloc_domain",
            "pep788.guard_in_atexit",
            "pep788.guard_in_py_atexit",
            "pep788.guard_while_finalizing",
            "pep788.finalize_waits_for_guard",
            "pep788.pending_call_under_guard",
        )
    ),
    Fact(
        "pep788.guard_from_foreign",
        (3, 15),
        (3, 15),
        True,
        _PYSTATE_315 + " PyInterpreterGuard_FromView: looks the view's id up under HEAD_LOCK and "
        "increments interp->finalization_guards unless it is "
        "_PyInterpreterGuard_GUARDS_NOT_ALLOWED; "
        "it needs no thread state (no _PyThreadState_GET on that path)",
    ),
    Fact(
        "pep788.guard_allocs",
        (3, 15),
        (3, 15),
        1,
        _PYSTATE_315
        + " PyInterpreterGuard_FromView: one PyMem_RawMalloc(sizeof(PyInterpreterGuard)) "
        "before HEAD_LOCK, on every call (freed by PyInterpreterGuard_Close or on refusal)",
    ),
    Fact(
        "pep788.guard_alloc_domain",
        (3, 15),
        (3, 15),
        "raw",
        "see pep788.guard_allocs: PyMem_RawMalloc is the raw domain (Include/cpython/pymem.h, "
        "PYMEM_DOMAIN_RAW)",
    ),
    Fact(
        "pep788.guard_in_atexit",
        (3, 15),
        (3, 15),
        True,
        _PYLIFE_315 + " make_pre_finalization_calls runs _PyAtExit_Call before it sets "
        "finalization_guards to _PyInterpreterGuard_GUARDS_NOT_ALLOWED",
    ),
    Fact(
        "pep788.guard_in_py_atexit",
        (3, 15),
        (3, 15),
        False,
        _PYLIFE_315 + " _Py_Finalize: make_pre_finalization_calls leaves finalization_guards at "
        "_PyInterpreterGuard_GUARDS_NOT_ALLOWED, and call_ll_exitfuncs (the Py_AtExit callbacks) "
        "runs at "
        "the end of _Py_Finalize",
    ),
    Fact(
        "pep788.guard_while_finalizing",
        (3, 15),
        (3, 15),
        False,
        _PYLIFE_315 + " _Py_Finalize calls _PyRuntimeState_SetFinalizing only after "
        "make_pre_finalization_calls returned, which needs finalization_guards to go from 0 to "
        "_PyInterpreterGuard_GUARDS_NOT_ALLOWED (compare-exchange): never while a guard is open",
    ),
    Fact(
        "pep788.finalize_waits_for_guard",
        (3, 15),
        (3, 15),
        True,
        _PYLIFE_315
        + " make_pre_finalization_calls parks on finalization_guards (_PyParkingLot_Park, "
        "timeout -1: no bound) until it reads 0; "
        + _PYSTATE_315
        + " PyInterpreterGuard_Close unparks "
        "when the count drops to 0",
    ),
    Fact(
        "pep788.pending_call_under_guard",
        (3, 15),
        (3, 15),
        "not-run",
        _PYLIFE_315 + " make_pre_finalization_calls: after the guard wait it loops again only when "
        "interp_has_pending_calls, which reads interp->ceval.pending.npending, while "
        "Py_AddPendingCall "
        "fills _PyRuntime.ceval.pending_mainthread (Python/ceval_gil.c v3.15.0rc1 "
        "_PyEval_AddPendingCall); "
        "no later step of _Py_Finalize makes pending calls",
    ),
)

FIELDS: tuple[str, ...] = tuple(dict.fromkeys(f.field for f in TABLE))


def rows(field: str) -> list[Fact]:
    """Every row of ``field``.

    :param field: field name (str).
    :returns: list[Fact], possibly empty.
    """
    return [f for f in TABLE if f.field == field]


def fact(field: str, version: Version | None = None) -> Fact:
    """The row that covers ``version`` for ``field``.

    :param field: field name (str).
    :param version: (major, minor) tuple; default the running interpreter's.
    :returns: the matching Fact.
    :raises KeyError: unknown field, or no row covers that version.
    """
    v = tuple(version if version is not None else sys.version_info[:2])[:2]
    rs = rows(field)
    if not rs:
        raise KeyError(f"unknown field {field!r}")
    for r in rs:
        if r.lo <= v <= r.hi:
            return r
    raise KeyError(f"no expected value for {field!r} on CPython {v[0]}.{v[1]}")


def expected(field: str, version: Version | None = None) -> Any:
    """The expected value of ``field`` on CPython ``version``.

    :param field: field name (str), one of :data:`FIELDS`.
    :param version: (major, minor) tuple; default ``sys.version_info[:2]``.
    :returns: the value (int, bool, str or None).
    :raises KeyError: unknown field, or no row covers that version.
    """
    return fact(field, version).value


def newest() -> Version:
    """The newest CPython version the table has rows for.

    :returns: (major, minor), e.g. ``(3, 15)``.
    """
    return max(f.hi for f in TABLE)


def assumed(field: str, version: Version | None = None) -> tuple[Any, bool]:
    """The value to expect of ``field``, also on a version newer than the table.

    On a version the table covers this is :func:`expected`; on a newer one
    (e.g. CPython's main branch) it is the newest row's value, and the caller
    reports a difference as news rather than as a failure (as ``probe --check``
    does without ``--strict``).

    :param field: field name (str), one of :data:`FIELDS`.
    :param version: (major, minor) tuple; default ``sys.version_info[:2]``.
    :returns: (value, newer): the value, and whether it was taken from the
        newest row because ``version`` is newer than the table (bool).
    :raises KeyError: unknown field, or a version older than the table.
    """
    v = tuple(version if version is not None else sys.version_info[:2])[:2]
    if v > newest():
        return expected(field, newest()), True
    return expected(field, v), False


def _check_table() -> None:
    """Import-time sanity: no two rows of one field overlap.

    :raises AssertionError: on overlap.
    """
    for name in FIELDS:
        rs = sorted(rows(name), key=lambda r: r.lo)
        for a, b in zip(rs, rs[1:], strict=False):
            assert a.hi < b.lo, f"overlapping rows for {name}"


_check_table()
