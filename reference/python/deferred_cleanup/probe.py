# SPDX-License-Identifier: Apache-2.0
"""Measure CPython's pending-call machinery on the running interpreter.

``python -m deferred_cleanup.probe`` prints one table; ``--json PATH`` also
writes the measurements as JSON; ``--check`` compares them with the expected
table (:mod:`deferred_cleanup.cpython_facts`) and exits 1 on a difference
(``--help`` says how long it takes and what each exit status means).  The
measurements themselves are taken in C++ (``deferred_cleanup._native.probe``)
from a *foreign thread*: a plain
``std::thread`` with no Python thread state, like CUDA's user-object destructor
thread.  This module only orchestrates: it holds the main thread in a
pure-Python loop, in ``time.sleep`` or in a C call when that is the point of a
measurement, and it runs the finalization cases in child processes.

Every measured field (see :mod:`deferred_cleanup.cpython_facts` for the list
and what each means) is a stable value suitable for exact comparison: an int,
a bool or a short category string.  Raw timings go to ``extra`` and are never
compared.  Every wait is bounded; every child process has a timeout.

JSON layout::

    {"interpreter": {"name", "source", "version", "version_info", "debug",
                     "gil_disabled", "implementation", "executable"},
     "fields": {FIELD: VALUE, ...},
     "extra": {FIELD: {raw data}, ...},
     "reference_burst": {...} or {"available": false, "why": "..."}}
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import platform
import signal
import subprocess
import sys
import sysconfig
import threading
import time

from . import _native, cpython_facts

P = _native.probe

#: How long a pending call may take to run after it was added before the probe
#: calls it "starved" (milliseconds).  Unstarved calls run within microseconds;
#: the bound is wide so that a loaded two-core machine does not misclassify.
STARVED_AFTER_MS = 1500.0
#: Delay before the foreign thread adds its call, so that the main thread is
#: already in the state being measured (milliseconds).
ADD_DELAY_MS = 30.0
#: How long the main thread sleeps / blocks in cases (b) and (c) (milliseconds).
HOLD_MS = 400.0
#: Child-process timeout (seconds).
CHILD_TIMEOUT_S = 60.0


def _wait_pure_python(slot: int, bound_ms: float) -> None:
    """Spin in a pure-Python loop until ``slot`` ran or ``bound_ms`` passed.

    :param slot: slot index from the native probe (int).
    :param bound_ms: upper bound on the wait, in milliseconds (float).
    :returns: None.  Raises nothing of its own.
    """
    deadline = P.now_ms() + bound_ms
    while not P.ran(slot) and P.now_ms() < deadline:
        pass


def _flush() -> int:
    """Run whatever is still queued (``Py_MakePendingCalls`` on the main thread).

    :returns: the C return value (int, 0 or -1).  Raises whatever a queued call raised.
    """
    return P.make_pending_calls()


# ---------------------------------------------------------------- 1, 2: capacity
def probe_capacity(fields: dict, extra: dict) -> None:
    """Capacity and behaviour when full.

    A foreign thread adds pending calls while the main thread holds the GIL in
    C, until one add returns -1; then the main thread (with a thread state)
    tries one more add.  ``Py_MakePendingCalls`` then runs the queue.

    :param fields: dict receiving the compared fields (mutated).
    :param extra: dict receiving raw data (mutated).
    :returns: None.
    """
    _flush()
    r = P.fill_from_foreign(10000)
    _flush()
    base, cap, limit = r["base"], r["accepted"], r["limit"]
    slots = [P.slot(base + i) for i in range(cap)]
    ran = [i for i, s in enumerate(slots) if s["ran"]]
    order = [
        i
        for i, s in sorted(
            ((i, s) for i, s in enumerate(slots) if s["ran"]), key=lambda p: p[1]["seq"]
        )
    ]
    if order == list(range(cap)):
        run_order = "fifo"
    elif order == list(reversed(range(cap))):
        run_order = "lifo"
    else:
        run_order = "other"
    refused = [P.slot(base + cap), P.slot(base + limit), P.slot(base + limit + 1)]
    fields["capacity"] = cap
    fields["full.returns"] = r["fail_rc"]
    fields["full.returns_again"] = r["second_rc"]
    fields["full.main_thread_returns"] = r["main_rc"]
    fields["full.exception_set"] = bool(r["exc_after_foreign"] or r["exc_after_main"])
    fields["full.evicted"] = len(ran) != cap
    fields["full.run_order"] = run_order
    fields["full.refused_runs"] = any(s["ran"] for s in refused)
    extra["capacity"] = {
        "ran": len(ran),
        "exc_after_foreign": r["exc_after_foreign"],
        "exc_after_main": r["exc_after_main"],
    }


# ---------------------------------------------------------------- 6: batch
def probe_batch(fields: dict, extra: dict) -> None:
    """How many queued calls run at one eval-breaker check.

    The queue is filled to capacity (all but one call from a foreign thread,
    the last from the main thread so that the eval breaker is signalled on
    every version), then a pure-Python loop advances a step counter between
    bytecodes.  Every call records the step at which it ran.

    :param fields: dict receiving the compared fields (mutated).
    :param extra: dict receiving raw data (mutated).
    :returns: None.
    """
    _flush()
    cap = fields["capacity"]
    r = P.queue_calls(cap - 1, 1)
    n = r["n"] - r["refused"]
    for _ in range(100000):
        P.step()
        if P.ran(r["base"] + n - 1) and all(P.ran(r["base"] + i) for i in range(n)):
            break
    _flush()
    steps = [P.slot(r["base"] + i)["step"] for i in range(n)]
    first = min(steps)
    batch = sum(1 for s in steps if s == first)
    fields["breaker.batch"] = batch
    fields["breaker.batch_all"] = batch == n
    extra["breaker"] = {"queued": n, "distinct_steps": len(set(steps)), "refused": r["refused"]}


# ---------------------------------------------------------------- 5: exception
def probe_exception(fields: dict, extra: dict) -> None:
    """A pending call that returns -1 with an exception set.

    Queue A (raises RuntimeError, returns -1), B, C from a foreign thread and D
    from the main thread; run pure Python inside ``try``.  Record where the
    exception surfaces and whether B, C, D are kept and run at a later check.

    :param fields: dict receiving the compared fields (mutated).
    :param extra: dict receiving raw data (mutated).
    :returns: None.
    """
    _flush()
    unraisable = []
    old_hook = sys.unraisablehook
    sys.unraisablehook = unraisable.append
    try:
        # A and the calls behind it may already run at the eval-breaker check
        # right after queue_calls returns (before its result is stored), so
        # the slots are located beforehand and the call is inside the try.
        surfaced = "none"
        exc_step = None
        base, n = P.next_slot(), 4
        try:
            P.queue_calls(3, 1, 1)
            for _ in range(100000):
                P.step()
                if P.ran(base):
                    # A ran; give the eval loop a few more checks to raise.
                    for _ in range(100):
                        P.step()
                    break
        except RuntimeError as e:
            if "failed on purpose" in str(e):
                surfaced = "python-frame"
                exc_step = P.slot(base)["step"]
            else:
                raise
        rest = range(base + 1, base + n)
        for _ in range(100000):
            P.step()
            if all(P.ran(i) for i in rest):
                break
        rest_ran_loop = all(P.ran(i) for i in rest)
        try:
            _flush()
        except RuntimeError:  # pragma: no cover - only if A had not run yet
            pass
    finally:
        sys.unraisablehook = old_hook
    if surfaced == "none" and unraisable:
        surfaced = "unraisable"
    a_step = P.slot(base)["step"]
    rest_slots = [P.slot(i) for i in rest]
    rest_steps = [r["step"] for r in rest_slots]
    # B, C, D starting with A's exception still set would mean the same pass
    # over the queue went on after the failure; none set means they ran at a
    # later eval-breaker check, after the exception had been delivered.
    if not rest_ran_loop:
        when = "never"
    elif not any(r["exc_set"] for r in rest_slots):
        when = "later-check"
    elif all(r["exc_set"] for r in rest_slots):
        when = "same-check"
    else:
        when = "mixed"
    fields["exception.surfaces"] = surfaced
    fields["exception.rest_kept"] = rest_ran_loop
    fields["exception.rest_when"] = when
    extra["exception"] = {
        "a_step": a_step,
        "exc_step": exc_step,
        "rest_steps": rest_steps,
        "unraisable": len(unraisable),
    }


# ---------------------------------------------------------------- 4: delays
def _delay(mode: str) -> tuple[str, dict]:
    """One delay case: the main thread busy / sleeping / in a GIL-releasing C call.

    :param mode: ``"busy_python"``, ``"sleep"`` or ``"c_call"`` (str).
    :returns: (category str, raw dict).  Categories: ``"ran"`` / ``"starved"``
        for busy_python; ``"during-sleep"`` / ``"after-sleep"`` / ``"starved"``
        for sleep; ``"during-call"`` / ``"after-call"`` / ``"starved"`` for c_call;
        ``"not-added"`` if the foreign thread had not added by the end of the hold.
    """
    _flush()
    i = P.start_foreign_add(ADD_DELAY_MS)
    hold_end = None
    if mode == "busy_python":
        _wait_pure_python(i, ADD_DELAY_MS + STARVED_AFTER_MS)
    elif mode == "sleep":
        # The sleep's end cannot be timed from Python: a pending call runs at
        # the eval-breaker check right after time.sleep returns, before any
        # further call.  time.sleep lasts at least HOLD_MS, so its end is
        # bounded below by start + HOLD_MS.
        hold_end = P.now_ms() + HOLD_MS
        time.sleep(HOLD_MS / 1000.0)
        _wait_pure_python(i, STARVED_AFTER_MS)
    elif mode == "c_call":
        _, hold_end = P.blocking_call(HOLD_MS)
        _wait_pure_python(i, STARVED_AFTER_MS)
    else:
        raise ValueError(mode)
    s = P.slot(i)  # whether and when it ran: read before anything can run it
    P.join_foreign()
    _flush()
    # The add's own fields come from after the join: on 3.13+ the call can run
    # on this thread before the foreign thread has published `added` (it is
    # stored after Py_AddPendingCall returns), so the first snapshot may
    # show a call that ran but was "not added" yet.
    late = P.slot(i)
    raw = {
        "add_rc": late["add_rc"],
        "added": late["added"],
        "delay_ms": (s["ran_ms"] - late["add_ms"]) if s["ran"] else None,
        "ran_after_flush": late["ran"],
    }
    if not late["added"] or (hold_end is not None and late["add_ms"] > hold_end):
        return "not-added", raw
    if not s["ran"]:
        return "starved", raw
    if mode == "busy_python":
        return "ran", raw
    word = "sleep" if mode == "sleep" else "call"
    return ("during-" if s["ran_ms"] < hold_end else "after-") + word, raw


def probe_delays(fields: dict, extra: dict) -> None:
    """Delay from a foreign-thread add to the call running.

    :param fields: dict receiving ``delay.busy_python``, ``delay.sleep``,
        ``delay.c_call`` (mutated).
    :param extra: dict receiving raw timings in milliseconds (mutated).
    :returns: None.
    """
    for mode in ("busy_python", "sleep", "c_call"):
        cat, raw = _delay(mode)
        fields[f"delay.{mode}"] = cat
        extra[f"delay.{mode}"] = raw


# ---------------------------------------------------------------- 3: runner
def _runner(main_mode: str) -> tuple[str, dict]:
    """Which thread runs a foreign-thread pending call while another Python thread runs.

    :param main_mode: ``"busy"`` (main spins in pure Python) or ``"sleep"``
        (main sleeps) while a second Python thread spins (str).
    :returns: (``"main"`` / ``"other"`` / ``"none"`` / ``"unknown"``, raw dict).
    """
    _flush()
    stop = threading.Event()
    other = {}

    def spin() -> None:
        other["ident"] = threading.get_ident()
        deadline = time.monotonic() + 5.0
        while not stop.is_set() and time.monotonic() < deadline:
            pass

    t = threading.Thread(target=spin, name="probe-spinner", daemon=True)
    t.start()
    i = P.start_foreign_add(ADD_DELAY_MS)
    if main_mode == "busy":
        _wait_pure_python(i, ADD_DELAY_MS + STARVED_AFTER_MS)
    else:
        time.sleep(HOLD_MS / 1000.0)
        _wait_pure_python(i, STARVED_AFTER_MS)
    stop.set()
    t.join(10.0)
    s = P.slot(i)
    P.join_foreign()
    _flush()
    main_ident = threading.main_thread().ident
    if not s["ran"]:
        who = "none"
    elif s["thread"] == main_ident:
        who = "main"
    elif s["thread"] == other.get("ident"):
        who = "other"
    else:
        who = "unknown"
    return who, {"delay_ms": (s["ran_ms"] - s["add_ms"]) if s["ran"] else None}


def probe_runner(fields: dict, extra: dict) -> None:
    """Who runs the calls.

    :param fields: dict receiving ``runner.main_busy`` and ``runner.main_sleeping`` (mutated).
    :param extra: dict receiving raw timings (mutated).
    :returns: None.
    """
    for mode, name in (("busy", "runner.main_busy"), ("sleep", "runner.main_sleeping")):
        who, raw = _runner(mode)
        fields[name] = who
        extra[name] = raw


# ---------------------------------------------------------------- 8: subinterpreters
SUB_CODE = "import time\n_t = time.monotonic() + %f\nwhile time.monotonic() < _t:\n    pass\n"


def probe_subinterpreter(fields: dict, extra: dict) -> None:
    """Which interpreter runs a call a foreign thread added while a subinterpreter ran.

    A legacy subinterpreter (``Py_NewInterpreter``) runs a pure-Python loop on
    the main thread for ``HOLD_MS`` while a foreign thread adds a call; then the
    main interpreter waits (sleeping in short steps, bounded).

    :param fields: dict receiving ``subinterp.runner`` (``"main"`` / ``"sub"`` /
        ``"lost"`` (never ran, not even after ``Py_MakePendingCalls`` in the main
        interpreter) / ``"n/a: <reason>"``) (mutated).
    :param extra: dict receiving raw data (mutated).
    :returns: None.
    """
    _flush()
    r = P.subinterpreter_add(SUB_CODE % (HOLD_MS / 1000.0), ADD_DELAY_MS)
    if not r["available"]:
        P.join_foreign()
        fields["subinterp.runner"] = "n/a: " + r["why"]
        return
    i = r["slot"]
    deadline = time.monotonic() + STARVED_AFTER_MS / 1000.0
    while not P.ran(i) and time.monotonic() < deadline:
        time.sleep(0.005)
    P.join_foreign()
    _flush()
    s = P.slot(i)
    if not s["ran"]:
        # Not even Py_MakePendingCalls in the main interpreter ran it: the call
        # went into the subinterpreter's own queue and ended with it.
        who = "lost"
    elif s["interp"] == r["main_id"]:
        who = "main"
    elif s["interp"] == r["sub_id"]:
        who = "sub"
    else:
        who = "unknown"
    fields["subinterp.runner"] = who
    extra["subinterp"] = {
        "main_id": r["main_id"],
        "sub_id": r["sub_id"],
        "ran_before_end": r["ran_before_end"],
        "run_rc": r["run_rc"],
    }


# ---------------------------------------------------------------- 6b: fork
#: How many calls the fork probe queues before it forks.
FORK_QUEUED = 4


def probe_fork(fields: dict, extra: dict) -> None:
    """Pending calls queued before ``fork()``: does the child run them?

    A foreign thread queues :data:`FORK_QUEUED` calls (and is joined), then
    the main thread forks from C with no bytecode in between (as
    :func:`os.fork` does: ``PyOS_BeforeFork``, ``fork``,
    ``PyOS_AfterFork_Child``) and the child runs ``Py_MakePendingCalls`` once.
    The parent's own copies then run at the next flush (``_flush()``, a plain
    function call that runs pending calls).

    :param fields: dict receiving ``fork.queued_calls_in_child``: ``"run"``
        (the child ran all of them), ``"lost"`` (none), ``"partial"``, or
        ``"child-failed"`` (fork or the child failed) (mutated).
    :param extra: dict receiving ``fork`` (the raw counts and the child's wait
        status) (mutated).
    :returns: None.  Raises RuntimeError when the queue refused an add.
    """
    _flush()
    r = P.fork_keeps_queued(FORK_QUEUED)
    _flush()
    ran, queued = r["child_ran"], r["queued"]
    if ran < 0 or r["child_status"] != 0:
        cat = "child-failed"
    elif ran == queued:
        cat = "run"
    elif ran == 0:
        cat = "lost"
    else:
        cat = "partial"
    fields["fork.queued_calls_in_child"] = cat
    extra["fork"] = {
        "queued": queued,
        "child_ran": ran,
        "child_status": r["child_status"],
        "parent_ran": sum(P.ran(r["base"] + i) for i in range(queued)),
    }


# ---------------------------------------------------------------- 7: finalization
def _child(kind: str) -> None:
    """Body of a finalization child process (``--child KIND``).

    ``finalize-foreign``: a Python ``atexit`` handler reports
    ``Py_IsFinalizing()`` and adds a marker call from a foreign thread; a
    ``Py_AtExit`` callback reports ``Py_IsInitialized()``; a C ``atexit``
    handler adds a pending call from a foreign thread after ``Py_FinalizeEx``
    has returned.  ``finalize-main``: the handler adds its marker from the main
    thread.  Everything is written with ``write(2)`` to fd 1 as ``key`` lines.

    ``exit-flush``: ``threading._shutdown`` is wrapped by a C function that
    adds, from the main thread and as the last thing before CPython's
    exit-time flush, a pending call that returns -1 with RuntimeError set
    (:func:`probe_exit_flush`).

    ``pep788``: the last Python atexit handler arms the PEP 788 holder and
    poller threads (:func:`probe_pep788`); a ``Py_AtExit`` callback reports.

    :param kind: ``"finalize-foreign"``, ``"finalize-main"``, ``"exit-flush"`` or
        ``"pep788"`` (str).
    :returns: None (the process then exits normally, running finalization).
    """
    P.set_marker_fd(1)
    if kind == "exit-flush":
        # A C wrapper of threading._shutdown adds a failing pending call last.
        P.arm_exit_flush()
        os.write(1, b"child:ready\n")
        return
    if kind == "pep788":
        # Registered first, so it is the last Python atexit handler of ours.
        def last() -> None:
            r = P.pep788_fin_arm(PEP788_HOLD_MS, PEP788_ADD_AT_MS)
            os.write(1, b"pep788:atexit_guard=%d\n" % int(r["atexit_guard"]))
            os.write(1, b"pep788:holder_guard=%d\n" % int(r["holder_guard"]))
            P.pep788_atexit_end()

        atexit.register(last)
        os.write(1, b"child:ready\n")
        return
    if kind == "finalize-foreign":
        P.arm_after_finalize()
        P.arm_ll_exit()

    def handler() -> None:
        os.write(1, b"atexit_finalizing=%d\n" % P.is_finalizing())
        os.write(1, b"atexit_sys_finalizing=%d\n" % int(sys.is_finalizing()))
        if kind == "finalize-foreign":
            P.add_marker_from_foreign(1)
        else:
            P.add_marker_from_main(2)

    atexit.register(handler)
    os.write(1, b"child:ready\n")


def _run_child(kind: str) -> tuple[int, list[str]]:
    """Run ``python -m deferred_cleanup.probe --child KIND`` without core dumps.

    :param kind: child kind (str).
    :returns: (return code int, negative for a signal; output lines list[str]).
    :raises subprocess.TimeoutExpired: after ``CHILD_TIMEOUT_S`` seconds.
    """

    def no_core() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    p = subprocess.run(
        [sys.executable, "-m", "deferred_cleanup.probe", "--child", kind],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        timeout=CHILD_TIMEOUT_S,
        preexec_fn=no_core,
        env=dict(os.environ, PYTHONFAULTHANDLER=""),
    )
    return p.returncode, p.stdout.decode(errors="replace").splitlines() + [
        "stderr:" + ln for ln in p.stderr.decode(errors="replace").splitlines()[-12:]
    ]


def _signal_name(rc: int) -> str:
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


def probe_finalization(fields: dict, extra: dict) -> None:
    """Finalization, in child processes.

    :param fields: dict receiving ``atexit.finalizing``, ``atexit.foreign_add_runs``,
        ``atexit.main_add_runs``, ``py_atexit.initialized``, ``after_finalize.outcome``,
        ``after_finalize.signal``, ``after_finalize.returns`` (mutated).
    :param extra: dict receiving the children's raw output (mutated).
    :returns: None.
    """
    rc, lines = _run_child("finalize-foreign")
    kv = dict(ln.split("=", 1) for ln in lines if "=" in ln and not ln.startswith("stderr:"))
    fields["atexit.finalizing"] = (
        kv.get("atexit_finalizing") == "1" if "atexit_finalizing" in kv else "no-report"
    )
    fields["atexit.foreign_add_runs"] = "ran:1" in lines
    fields["py_atexit.initialized"] = (
        kv.get("ll_initialized") == "1" if "ll_initialized" in kv else "no-report"
    )
    if rc < 0:
        outcome, sig = "crash", _signal_name(rc)
    elif "ran:99" in lines:
        outcome, sig = "ran", "none"
    elif any(ln.startswith("after:rc:") for ln in lines):
        outcome, sig = "no-op", "none"
    else:
        outcome, sig = f"exit {rc}", "none"
    fields["after_finalize.outcome"] = outcome
    fields["after_finalize.signal"] = sig
    rcs = [ln.split(":", 2)[2] for ln in lines if ln.startswith("after:rc:")]
    fields["after_finalize.returns"] = int(rcs[0]) if rcs else None
    extra["finalize-foreign"] = {"rc": rc, "lines": lines}
    rc2, lines2 = _run_child("finalize-main")
    fields["atexit.main_add_runs"] = "ran:2" in lines2
    extra["finalize-main"] = {"rc": rc2, "lines": lines2}


def probe_exit_flush(fields: dict, extra: dict) -> None:
    """A pending call that fails in CPython's exit-time flush, in a child.

    The child (``--child exit-flush``) wraps ``threading._shutdown`` with a C
    function that adds, from the main thread, a pending call returning -1
    with RuntimeError set.  ``Py_FinalizeEx`` calls ``threading._shutdown``
    and then ``_Py_FinishPendingCalls`` with no Python frame in between
    (Python/pylifecycle.c, v3.10.0 to v3.14.0), so the flush runs the call;
    the call writes ``flush:ran:0`` when no frame runs.

    :param fields: dict receiving ``exit_flush.error`` (str): ``"SystemError"``
        when the child's stderr shows a SystemError (CPython turns the -1 into
        ``PyErr_BadInternalCall()`` chained to the call's exception),
        ``"exception"`` when it shows only the call's RuntimeError,
        ``"silent"`` when it shows neither, ``"ran-in-frame"`` when the call
        ran inside Python code (not in the flush), ``"not-run"`` when it
        never ran (mutated).
    :param extra: dict receiving the child's raw output, ``exit-flush`` (mutated).
    :returns: None.
    """
    rc, lines = _run_child("exit-flush")
    err = [ln for ln in lines if ln.startswith("stderr:")]
    if "flush:ran:1" in lines:
        value = "ran-in-frame"
    elif "flush:ran:0" not in lines:
        value = "not-run"
    elif any("SystemError" in ln for ln in err):
        value = "SystemError"
    elif any("probe: pending call failed" in ln for ln in err):
        value = "exception"
    else:
        value = "silent"
    fields["exit_flush.error"] = value
    extra["exit-flush"] = {"rc": rc, "lines": lines}


# ---------------------------------------------------------------- 9: PEP 788 guards
#: Fields of the PEP 788 probe; each is "absent" where the interpreter has no
#: PyInterpreterGuard (before 3.15).
PEP788_FIELDS = (
    "pep788.guard_from_foreign",
    "pep788.guard_allocs",
    "pep788.guard_alloc_domain",
    "pep788.guard_in_atexit",
    "pep788.guard_in_py_atexit",
    "pep788.guard_while_finalizing",
    "pep788.finalize_waits_for_guard",
    "pep788.pending_call_under_guard",
)
#: How long the finalization child's holder thread keeps its guard (ms), and
#: when, inside that, it adds its pending call (ms).
PEP788_HOLD_MS = 400.0
PEP788_ADD_AT_MS = 150.0
#: How long the main thread keeps the GIL while a foreign thread asks for a guard
#: under tracemalloc (ms); raw data only (extra ``pep788.tracemalloc``).
PEP788_GIL_HOLD_MS = 200.0


def probe_pep788(fields: dict, extra: dict) -> None:
    """PEP 788 interpreter guards seen from a foreign thread (CPython 3.15+).

    The view is made at import (``PyInterpreterView_FromMain``); a thread with
    no thread state calls ``PyInterpreterGuard_FromView`` with allocations
    counted inside the call (``PyMem_SetAllocator`` forwarding hooks on the raw,
    mem and obj domains), then times ``n`` FromView+Close pairs; it asks again
    while the main thread keeps the GIL under ``tracemalloc``; a child
    process's finalization says from which point guards fail, whether
    ``Py_FinalizeEx`` waits for an open one, and what becomes of a pending call
    added under it meanwhile.

    :param fields: dict receiving :data:`PEP788_FIELDS` (mutated); every one is
        ``"absent"`` when the build has no PEP 788.
    :param extra: dict receiving raw data: ``pep788.guard`` (counts, ``pair_ns``
        and ``from_view_ns`` in nanoseconds), ``pep788.tracemalloc`` (``took_ms``),
        ``pep788.finalize`` (the child's lines, times in ms) (mutated).
    :returns: None.
    """
    if not P.pep788_available():
        for f in PEP788_FIELDS:
            fields[f] = "absent"
        return
    g = P.pep788_guard_from_foreign(20000)
    allocs = g["allocs_in_from_view"]
    fields["pep788.guard_from_foreign"] = bool(g["ok"])
    fields["pep788.guard_allocs"] = int(sum(allocs.values()))
    fields["pep788.guard_alloc_domain"] = (
        "+".join(k for k in ("raw", "mem", "obj") if allocs[k]) or "none"
    )
    extra["pep788.guard"] = g
    import tracemalloc

    tracemalloc.start()
    try:
        t = P.pep788_guard_while_main_holds_gil(PEP788_GIL_HOLD_MS)
    finally:
        tracemalloc.stop()
    extra["pep788.tracemalloc"] = t
    rc, lines = _run_child("pep788")
    kv = dict(ln.split("=", 1) for ln in lines if "=" in ln and not ln.startswith("stderr:"))
    num = lambda k: float(kv[k]) if k in kv else None  # noqa: E731
    fields["pep788.guard_in_atexit"] = kv.get("pep788:atexit_guard") == "1"
    fields["pep788.guard_in_py_atexit"] = kv.get("pep788:py_atexit_guard") == "1"
    fields["pep788.guard_while_finalizing"] = kv.get("pep788:ok_while_finalizing") == "1"
    close_ms, refused_ms = num("pep788:close_ms"), num("pep788:refused_ms")
    fields["pep788.finalize_waits_for_guard"] = (
        close_ms is not None and refused_ms is not None and refused_ms >= close_ms >= 0
    )
    if kv.get("pep788:add_rc") not in ("0", None):
        pending = "refused"
    elif kv.get("pep788:marker_ran") == "1":
        pending = "ran"
    else:
        pending = "not-run"
    fields["pep788.pending_call_under_guard"] = pending
    end = num("pep788:atexit_end_ms")
    extra["pep788.finalize"] = {
        "rc": rc,
        "lines": lines,
        "wait_ms": (refused_ms - end) if (refused_ms is not None and end) else None,
    }


# ---------------------------------------------------------------- reference burst
def probe_reference_burst() -> dict:
    """The reference's own burst, if this build has ``deferred_cleanup.reference_burst``.

    Run in a child process (bounded by ``CHILD_TIMEOUT_S``) so that a fault in
    the reference cannot take the probe down.

    :returns: the dict ``reference_burst(callbacks=10000, threads=8)`` returned,
        or ``{"available": False, "why": str}``.
    """
    import deferred_cleanup

    if not callable(getattr(deferred_cleanup, "reference_burst", None)):
        return {"available": False, "why": "deferred_cleanup.reference_burst is not in this build"}
    try:
        p = subprocess.run(
            [sys.executable, "-m", "deferred_cleanup.probe", "--child", "burst"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=CHILD_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return {
            "available": False,
            "why": f"reference_burst did not finish in {CHILD_TIMEOUT_S:.0f} s",
        }
    if p.returncode != 0:
        tail = p.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        return {
            "available": False,
            "why": f"reference_burst child exited {p.returncode}: {tail[0]}",
        }
    out = json.loads(p.stdout.decode().strip().splitlines()[-1])
    out["available"] = True
    return out


# ---------------------------------------------------------------- driver
def derived_name(version_info, debug: bool, gil_disabled: bool, suffix: str = "custom") -> str:
    """The matrix-style column name of an interpreter that no environment variable names.

    :param version_info: (major, minor, ...) of the interpreter (sequence of int).
    :param debug: whether it is a debug build (bool, ``sys.gettotalrefcount`` present).
    :param gil_disabled: whether it is a free-threaded build (bool, ``Py_GIL_DISABLED``).
    :param suffix: what follows the dash (str), ``"custom"`` by default.
    :returns: str, e.g. ``"cp312-custom"``, ``"cp314d-custom"``, ``"cp313t-custom"`` (the
        letters are CPython's ABI flags: ``t`` free-threaded, ``d`` debug).
    """
    flags = ("t" if gil_disabled else "") + ("d" if debug else "")
    return f"cp{version_info[0]}{version_info[1]}{flags}-{suffix}"


def derived_source() -> str:
    """Where the running interpreter comes from, when ``DC_INTERPRETER_SOURCE`` does not say.

    :returns: str ``"path:<file>"``: the interpreter binary with symbolic links resolved,
        so that a virtual environment names the interpreter it was made from (on POSIX a
        venv's ``bin/python`` is a link to it).
    """
    return "path:" + os.path.realpath(sys.executable)


def interpreter_metadata() -> dict:
    """Describe the running interpreter.

    :returns: dict with ``name`` and ``source`` (from ``DC_INTERPRETER_NAME`` /
        ``DC_INTERPRETER_SOURCE``; when unset, :func:`derived_name` and
        :func:`derived_source`, e.g. ``"cp312-custom"`` and ``"path:/usr/bin/python3.12"``),
        ``version`` (str), ``version_info`` ([major, minor, micro]), ``debug`` (bool),
        ``gil_disabled`` (bool), ``implementation`` and ``executable`` (str).
    """
    debug = hasattr(sys, "gettotalrefcount")
    gil_disabled = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    return {
        "name": os.environ.get("DC_INTERPRETER_NAME")
        or derived_name(sys.version_info, debug, gil_disabled),
        "source": os.environ.get("DC_INTERPRETER_SOURCE") or derived_source(),
        "version": platform.python_version(),
        "version_info": list(sys.version_info[:3]),
        "debug": debug,
        "gil_disabled": gil_disabled,
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
    }


PROBES = (
    probe_capacity,
    probe_batch,
    probe_exception,
    probe_delays,
    probe_runner,
    probe_subinterpreter,
    probe_fork,
    probe_finalization,
    probe_exit_flush,
    probe_pep788,
)


def measure(with_burst: bool = True) -> dict:
    """Run every probe on this interpreter.

    :param with_burst: also record ``reference_burst`` (bool).
    :returns: the JSON-ready dict described in the module docstring.
    """
    fields: dict = {}
    extra: dict = {}
    for probe in PROBES:
        probe(fields, extra)
    return {
        "interpreter": interpreter_metadata(),
        "fields": fields,
        "extra": extra,
        "reference_burst": probe_reference_burst()
        if with_burst
        else {"available": False, "why": "not requested"},
    }


class LoadError(ValueError):
    """A ``--load`` file that cannot be read or is not a probe result."""


#: The keys of ``interpreter`` that :func:`format_table` and the check read.
_LOAD_METADATA = ("name", "version", "source", "debug", "gil_disabled")


def load_result(path: str) -> dict:
    """Read a probe result written by ``--json`` and check its shape.

    :param path: the file (str).
    :returns: the result (dict), with ``interpreter`` (a dict holding
        ``_LOAD_METADATA``, ``version`` a list of at least two ints) and
        ``fields`` (a dict), whose version reads as (major, minor).
    :raises LoadError: the file is missing or unreadable (the OS error's
        words), not JSON (line and column), or not a probe result (what is
        missing); one line each, which ``main`` prints before exiting 2.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise LoadError(f"cannot read the file: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise LoadError(f"not a probe result: not UTF-8 text ({e.reason})") from None
    try:
        result = json.loads(text)
    except ValueError as e:
        raise LoadError(f"not a probe result: not JSON ({e})") from None
    if not isinstance(result, dict):
        raise LoadError(f"not a probe result: a JSON {type(result).__name__}, not an object")
    md, fields = result.get("interpreter"), result.get("fields")
    if not isinstance(md, dict) or not isinstance(fields, dict):
        raise LoadError('not a probe result: no "interpreter" and "fields" objects')
    missing = [k for k in _LOAD_METADATA if k not in md]
    if missing:
        raise LoadError(f"not a probe result: interpreter has no {', '.join(missing)}")
    from . import report

    try:
        report.version_of(result)
    except (TypeError, ValueError, AttributeError, IndexError):
        raise LoadError(
            f"not a probe result: interpreter.version {md['version']!r} is not like '3.12.3'"
        ) from None
    return result


def format_table(result: dict) -> str:
    """Render one interpreter's measurements as a two-column text table.

    :param result: a dict from :func:`measure` (dict).
    :returns: the table (str).
    """
    md = result["interpreter"]
    rows = [
        ("interpreter", md["name"]),
        ("version", md["version"]),
        ("source", md["source"]),
        ("build", "debug" if md["debug"] else "release"),
        ("Py_GIL_DISABLED", "1" if md["gil_disabled"] else "0"),
    ]
    rows += [
        (k, json.dumps(v) if not isinstance(v, str) else v) for k, v in result["fields"].items()
    ]
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(w)}  {v}" for k, v in rows)


HELP_EPILOG = """\
time: about 5 s on an idle machine, at most a few minutes on a loaded one:
  every wait is bounded (a call counts as starved after 1.5 s) and every child
  interpreter has a 60 s timeout.

child interpreters: the finalization cases and the reference burst run in
  child processes (python -m deferred_cleanup.probe --child ...).  On CPython
  3.10-3.12 one child crashes ON PURPOSE with SIGSEGV: it calls
  Py_AddPendingCall after Py_FinalizeEx, which those versions do not survive
  (field after_finalize.outcome).  Core dumps are turned off for that child,
  but the kernel log or systemd-coredump may still record the crash.

--check compares with deferred_cleanup.cpython_facts, the cited table of
  expected facts, for the running version (a version newer than the table,
  e.g. CPython's main branch, is compared with the newest row, 3.15, under
  the heading "newer than the table: differences from 3.15").

exit status:
  0  measured (without --check); or no difference from the table; or only
     differences of a version newer than the table, without --strict
  1  --check found a difference from the table (with --strict: also for a
     version newer than the table)
  2  bad arguments, or a --load file that is missing, unreadable or not a
     probe result (one line on stderr says which)
  other: the probe itself failed (a traceback says where)

environment: DC_INTERPRETER_NAME and DC_INTERPRETER_SOURCE name the
  interpreter in the output (tools/matrix.py sets them); unset, the name is
  derived (e.g. cp312-custom) and the source is path:<the python binary>.
"""


def main(argv: list[str] | None = None) -> int:
    """Command line:
    ``python -m deferred_cleanup.probe [--json PATH] [--check [--strict]] [--load PATH]``.

    :param argv: arguments (list[str]; default ``sys.argv[1:]``).
    :returns: exit status (int): 0, or 1 when ``--check`` (or ``--strict``) finds a
        difference from the expected table that counts (see ``HELP_EPILOG``).
        2 when ``--load`` names a missing, unreadable or malformed file (one
        line on stderr, no traceback).
    :raises SystemExit: 2 on bad arguments (argparse).
    """
    ap = argparse.ArgumentParser(
        prog="python -m deferred_cleanup.probe",
        description=__doc__.split("\n\n")[0],
        epilog=HELP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--json", metavar="PATH", help="also write the measurements as JSON to PATH")
    ap.add_argument(
        "--no-burst", action="store_true", help="do not run deferred_cleanup.reference_burst"
    )
    ap.add_argument(
        "--check",
        action="store_true",
        help="compare with the expected table; exit 1 and print each difference if there is one",
    )
    ap.add_argument(
        "--strict",
        action="store_true",
        help="with --check (implied): a version newer than the table fails on a difference too",
    )
    ap.add_argument(
        "--load",
        metavar="PATH",
        help="do not measure: take the measurements from PATH, a file written by --json "
        "(e.g. on another machine), and print / check those",
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child == "burst":
        import deferred_cleanup

        print(json.dumps(deferred_cleanup.reference_burst(callbacks=10000, threads=8)))
        return 0
    if a.child:
        _child(a.child)
        return 0
    if a.load:
        try:
            result = load_result(a.load)
        except LoadError as e:
            print(f"python -m deferred_cleanup.probe: --load {a.load}: {e}", file=sys.stderr)
            return 2
    else:
        result = measure(with_burst=not a.no_burst)
    print(format_table(result))
    rb = result.get("reference_burst") or {"available": False, "why": "not recorded"}
    print(
        "reference burst: "
        + (
            json.dumps({k: v for k, v in rb.items() if k != "available"})
            if rb.get("available")
            else "not available (" + str(rb.get("why", "no reason recorded")) + ")"
        )
    )
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)
    if not (a.check or a.strict):
        return 0
    from . import report

    c = report.check(result)
    for line in c.lines(with_name=False):
        print(line)
    v = f"{c.against[0]}.{c.against[1]}"
    if not c.diffs:
        print(
            f"check: no difference from the expected table for {v} ({len(cpython_facts.FIELDS)} "
            "fields)"
        )
    elif c.fails(a.strict):
        print(f"check: {len(c.diffs)} difference(s) from the expected table for {v}: exit 1")
    else:
        print(
            f"check: {len(c.diffs)} difference(s) from {v}, the newest row, on CPython "
            f"{c.version}: "
            f"exit 0 (--strict makes them fail)"
        )
    return 1 if c.fails(a.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
