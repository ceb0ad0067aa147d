# SPDX-License-Identifier: Apache-2.0
"""deferred-cleanup: hand cleanup work from a foreign native thread to the
CPython main thread through ``Py_AddPendingCall``.

A *user object* attached to a graph keeps a Python object alive until the
driver destroys the user object.  The driver calls the destructor on one of its
own threads (no thread state); the destructor only pushes a preallocated item
onto an intrusive MPSC queue and makes sure one pending call is outstanding.
The main thread then releases the payload: from that pending call, or directly
at the next API entry point (gh-95820 starvation on 3.10-3.12).

Variants (chosen at import by ``DEFERRED_CLEANUP_VARIANT``):

``reference`` (default)
    seq_cst on the store-buffering pairs, the producer's fast path (push and
    one load while a pending call is outstanding), direct drains at entry
    points, re-arming a pending call that never ran, and an exit sequence
    in the ``atexit`` phase (after every other handler on 3.10-3.13): it
    drains while destructors of graphs destroyed before exit are still due
    (bounded by ``exit_wait_s``, see :func:`configure`), closes the in-flight
    gate, waits out producers inside it and drains a last time; a graph
    destroyed on the main thread after it, before finalization, gets the
    wait again.
``seed``
    the design as the text of cuda-python PR #2371 states it: a
    ``Py_AtExit`` callback stops accepting, the drain checks finalization and
    leaks, take loop then clear then re-check, acquire/release; no gate, no
    final drain, no direct drain.  For comparison only.
``cuda-core-1.2``
    cuda-core 1.2.0 as shipped (the same logic in 1.2.2): no ``Py_AtExit``;
    ``schedule()`` returns early when ``!Py_IsInitialized() || finalizing``;
    the drain's release clear is followed by an acquire re-check of the list,
    a store-buffering pair that loses wakeups on x86-64.  For comparison only.
``cuda-core-1.2-fixed``
    ``cuda-core-1.2`` plus the smallest fix of each of its three holes, each
    a named piece of its policy: two seq_cst fences in the drain tail's
    store-buffering pair (``sb_fences``), the in-flight gate around the
    shipped finalizing test and ``Py_AddPendingCall`` (``gate``), and an
    ``atexit``-phase exit hook that drains while destructors are due, closes
    the gate, waits it out and drains a last time (``exit_release``).  No
    fast path, no direct drain, no re-arming.  For comparison only.

Exceptions: :class:`DriverError` (a driver call failed), its subclass
:class:`DriverUnavailable` (no libcuda, no GPU, or built without ``cuda.h``),
:class:`ShutdownError` (the interpreter is exiting), :class:`NotMainThreadError`
and :class:`GraphDestroyedError`; all derive from :class:`RuntimeError`.
"""

from __future__ import annotations

import sys as _sys
import time as _time


def _in_main_interpreter() -> bool:
    """Whether this import runs in the main interpreter.

    Returns:
        bool: True in the main interpreter, or where the interpreter offers no
        way to tell (then it offers none to create a subinterpreter either).
    Raises:
        nothing.
    """
    try:
        import _interpreters as _interp  # 3.13+
    except ImportError:
        try:
            import _xxsubinterpreters as _interp  # 3.8-3.12
        except ImportError:
            return True

    def _id(x) -> int:
        # 3.14+ returns (id, whence) tuples; earlier versions an InterpreterID.
        return int(x[0] if isinstance(x, tuple) else x)

    return _id(_interp.get_current()) == _id(_interp.get_main())


# The queue, its atexit hook and its shutdown state are process-wide and bound
# to the main interpreter: Py_AddPendingCall from a thread without a thread
# state targets the main interpreter on 3.12+ (Python/ceval_gil.c, v3.12.0);
# on 3.10 and 3.11 it targets the interpreter whose thread state holds the GIL
# (Python/ceval.c, v3.11.0; bpo-10915), and the probe saw such a call lost
# (subinterp.runner in cpython_facts).  An import in a
# subinterpreter would register an atexit hook that closes the process-wide
# queue when that subinterpreter ends, so it is refused.
if not _in_main_interpreter():
    raise ImportError(
        "deferred_cleanup can only be imported in the main interpreter: its queue and shutdown "
        "hook are process-wide and pending calls from driver threads go to the main interpreter"
    )

from . import _native  # noqa: E402
from ._native import (  # noqa: F401,E402  (re-exported API)
    CudaDriver,
    Driver,
    DriverError,
    DriverUnavailable,
    Graph,
    GraphDestroyedError,
    NotMainThreadError,
    ShutdownError,
    SimulatedDriver,
)
from ._paths import get_cmake_dir, get_include  # noqa: F401,E402  (build paths)

__all__ = [
    "CudaDriver",
    "Driver",
    "DriverError",
    "DriverUnavailable",
    "Graph",
    "GraphDestroyedError",
    "NotMainThreadError",
    "ShutdownError",
    "SimulatedDriver",
    "counters",
    "configure",
    "drain_now",
    "get_cmake_dir",
    "get_include",
    "poll",
    "reference_burst",
    "settings",
    "stats",
    "variant",
]


def variant() -> str:
    """Return the variant this process runs.

    Returns:
        str: ``"reference"``, ``"seed"``, ``"cuda-core-1.2"`` or
        ``"cuda-core-1.2-fixed"``, fixed at import from the environment
        variable ``DEFERRED_CLEANUP_VARIANT`` (an unknown name, compared
        case-sensitively, makes the import raise :class:`ImportError` listing
        the four).

    Raises:
        Nothing.
    """
    return _native.variant()


def stats() -> dict:
    """Return the queue's counters; an API entry point.

    On the main thread of the reference variant this first drains the queue
    directly when it is not empty (gh-95820); elsewhere it retries scheduling.

    Returns:
        dict: counts (``int``): ``created`` (payloads attached or
        attempted), ``user_objects`` (user objects created: a destructor is
        due), ``enqueued`` (destructor calls), ``enqueued_late`` (of those,
        after shutdown), ``cleaned``, ``direct_cleanups`` (payloads of user
        objects that were never created), ``schedule_attempts``,
        ``schedule_failures``, ``pending_calls``, ``drain_cycles``,
        ``pending_calls_ignored``, ``direct_drains``, ``retries``, ``rearms``
        (stale claims re-armed), ``main_rearms`` (of those, by the main thread
        past the bound of two), ``calls_outstanding``, ``leaked_at_shutdown``,
        ``leaked_finalizing``, ``gate_timeouts``, ``forks``,
        ``cleanups_on_main``, ``cleanups_off_main``, ``destructors_on_main``,
        ``cleanups_after_shutdown``, ``host_calls_after_teardown``,
        ``deferred_interrupts``, ``interrupts_unraisable``,
        ``destructors_due``, ``graphs_alive``,
        ``payloads_in_live_graphs``, ``in_flight``; thread idents (``int``)
        ``main_thread`` and ``last_destructor_thread``; snapshots (``bool``)
        ``queue_empty``, ``scheduled``, ``accepting``, ``host_alive``,
        ``atexit_table_full`` (CPython's Py_AtExit table was full at import:
        no backstop; the exit counters are written by the exit sequence); and
        ``variant`` (``str``).  The docs' Troubleshooting section reads them.

    Raises:
        KeyboardInterrupt, SystemExit: raised by a payload's finalizer during
            the drain, which stops after that cleanup: the exception is
            raised at once, and the cleanups not yet run stay queued, in
            their order, with a pending call re-armed; each runs once, later
            (docs: Caveats, the early stop).
            Other errors raised by finalizers go to :func:`sys.unraisablehook`.
    """
    return _native.stats()


def counters() -> dict:
    """Return the same counters as :func:`stats` without draining or scheduling.

    A snapshot for observers and tests: relaxed loads, values may come from
    slightly different moments.

    Returns:
        dict: as :func:`stats`.

    Raises:
        Nothing.
    """
    return _native.counters()


def drain_now() -> int:
    """Run every queued cleanup now, on the calling (main) thread.

    Works in every variant (an explicit request, not the automatic entry-point
    drain).  Does not clear the scheduled flag, so an outstanding pending call
    stays the only one.

    Returns:
        int: number of cleanups run (0 when called from inside a cleanup).

    Raises:
        NotMainThreadError: called from a thread other than the main thread;
            nothing is drained or lost, the items stay queued.
        ShutdownError: called after the shutdown sequence ran.
        KeyboardInterrupt, SystemExit: raised by a finalizer during the
            drain, which stops after that cleanup: the exception is raised
            at once, and the cleanups not yet run stay queued, in their
            order, with a pending call re-armed; each runs once, later
            (docs: Caveats, the early stop).
    """
    return _native.drain_now()


def poll() -> str:
    """Run the entry-point step alone.

    Returns:
        str: ``"drained"`` (reference, main thread, queue not empty),
        ``"rescheduled"`` (seed, or off the main thread: a scheduling retry) or
        ``"nothing"``.

    Raises:
        KeyboardInterrupt, SystemExit: on the main thread, raised by a
            finalizer during the direct drain (reference), or kept from an
            earlier drain that could not deliver it; the drain stops early as
            in :func:`drain_now`.
    """
    return _native.poll()


#: reference_burst's largest ``callbacks``: one payload record per callback is
#: allocated before the burst, so a larger count would run for hours (or
#: forever, for a count like 10**400) instead of failing at once.
MAX_BURST_CALLBACKS = 10**7


def reference_burst(callbacks: int = 10000, threads: int = 8, timeout_s: float = 30.0) -> dict:
    """Measure the reference on one burst of destructor callbacks.

    Attaches ``callbacks`` payloads to one simulated graph, destroys it while
    the simulated driver holds the destructor calls back, then releases them
    all at once from ``threads`` native threads.  The main thread waits in
    ``time.sleep(0.0002)`` steps (dropping the GIL, calling no entry point), so
    the cleanups arrive through pending calls only.

    Args:
        callbacks (int): number of user objects (payloads), 1 to
            ``MAX_BURST_CALLBACKS`` (10**7).
        threads (int): number of native driver threads firing together,
            1 <= threads <= callbacks.
        timeout_s (float): seconds to wait for the last cleanup.

    Returns:
        dict: ``payloads`` (int), ``cleaned`` (int, payloads cleaned during
        the measurement), ``pending_calls`` (int, pending calls made),
        ``drain_cycles`` (int, pending calls that drained), ``schedule_failures``
        (int), ``delay_ms`` (float, milliseconds from the burst's release to
        the last cleanup), ``threads`` (int) and ``variant`` (str).

    Raises:
        TypeError: ``callbacks`` or ``threads`` not an int, ``timeout_s``
            not an int or float (bool is refused for each).
        ValueError: ``callbacks`` or ``threads`` below 1, ``callbacks``
            above ``MAX_BURST_CALLBACKS``, ``threads`` above 1024 or more
            threads than callbacks, ``timeout_s`` not from 0 to one year.
        TimeoutError: not every payload was cleaned within ``timeout_s``.
        NotMainThreadError: called from a thread other than the main thread
            (nothing attached or released).
        ShutdownError: called once the interpreter is finalizing.
    """
    for name, value in (("callbacks", callbacks), ("threads", threads)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"reference_burst: {name} must be an int, not {type(value).__name__}")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)):
        raise TypeError(
            f"reference_burst: timeout_s must be a number of seconds (int or float), "
            f"not {type(timeout_s).__name__}"
        )
    try:
        t = float(timeout_s)
    except OverflowError:  # an int too large for a float
        t = float("inf")
    if not 0.0 <= t <= 365 * 24 * 3600.0:  # NaN fails too
        raise ValueError(
            "reference_burst: timeout_s must be a finite number of seconds from 0 to 31536000"
        )
    if callbacks < 1 or threads < 1:
        raise ValueError("reference_burst: callbacks and threads must be >= 1")
    if callbacks > MAX_BURST_CALLBACKS:
        raise ValueError(f"reference_burst: callbacks must be from 1 to {MAX_BURST_CALLBACKS}")
    if threads > 1024:
        raise ValueError("reference_burst: threads must be from 1 to 1024")
    if threads > callbacks:
        raise ValueError(
            f"threads ({threads}) must not exceed callbacks ({callbacks}): each thread fires at "
            "least one"
        )
    try:
        drain_now()  # the main-thread check, and nothing queued before the burst
    except NotMainThreadError:
        raise NotMainThreadError(
            "reference_burst() may only be called on the main thread"
        ) from None
    driver = SimulatedDriver()
    graph = driver.create_graph()
    payload = object()
    for _ in range(callbacks):
        graph.attach(payload)
    before = counters()
    driver.set_hold(True)
    graph.destroy()
    released = driver.release(threads)
    target = before["cleaned"] + callbacks
    deadline = _time.monotonic() + timeout_s
    while counters()["cleaned"] < target:
        if _time.monotonic() > deadline:
            raise TimeoutError(
                f"reference_burst: {counters()['cleaned'] - before['cleaned']} of {callbacks} "
                f"cleaned after {timeout_s} s"
            )
        _time.sleep(0.0002)
    driver.wait_idle(timeout_s)
    after = counters()
    return {
        "payloads": released,
        "cleaned": after["cleaned"] - before["cleaned"],
        "pending_calls": after["pending_calls"] - before["pending_calls"],
        "drain_cycles": after["drain_cycles"] - before["drain_cycles"],
        "schedule_failures": after["schedule_failures"] - before["schedule_failures"],
        "delay_ms": (_native.last_cleanup_ns() - driver.last_release_ns) / 1e6,
        "threads": threads,
        "variant": variant(),
    }


def configure(
    exit_wait_s: float | None = None,
    stale_claim_s: float | None = None,
    backstop_wait_s: float | None = None,
) -> None:
    """Change the module's three time bounds (process-wide; any thread).

    Each bound is kept as the nearest whole nanosecond, so a value given in
    whole milliseconds is the one :func:`settings` gives back (a value in
    whole nanoseconds too, below about 48 days: past 2**22 s a double's
    step exceeds a nanosecond).

    Args:
        exit_wait_s (float | None): seconds the exit sequence keeps draining
            while destructors of graphs destroyed before exit are still due
            (default 5.0).  With the ``cuda`` driver this includes launched
            work that holds the last reference.  ``None`` keeps the current
            value.
        stale_claim_s (float | None): seconds a claimed pending call that
            has not run must have been seen outstanding before it may be
            re-armed (one more pending call is added; at most three of the
            queue's calls are ever outstanding, the third only when the main
            thread re-arms past the bound after two lost calls; default
            1.0).  The claim's clock starts at the first re-arm check that
            looks at it after its call was added (a sampled producer, an
            entry point), not at the add, so a lost call is recovered at the
            first look at least this long after that first look.  ``None``
            keeps the current value.
        backstop_wait_s (float | None): seconds the ``Py_AtExit`` backstop,
            after the interpreter is gone, waits in all for simulated
            drivers' destructor calls still due and for producers inside
            ``Py_AddPendingCall``, one deadline whatever the number of
            drivers (every variant; default 5.0).  What is still due then is
            counted as leaked.  The exit sequence's own wait is
            ``exit_wait_s``; the two together bound the exit's waiting.
            ``None`` keeps the current value.

    Returns:
        None.

    Raises:
        TypeError: a bound that is not None, an int or a float (a str,
            bytes, list or bool is refused; the message names the parameter).
        ValueError: a bound that is not finite, negative, larger than one
            year (an int too large for a float included), or
            (``stale_claim_s``) below one nanosecond, zero included (it is
            kept in whole nanoseconds).
    """
    _native.configure(exit_wait_s, stale_claim_s, backstop_wait_s)


def settings() -> dict:
    """Return the current bounds set by :func:`configure`.

    Returns:
        dict: ``exit_wait_s``, ``stale_claim_s`` and ``backstop_wait_s``
        (each a float, seconds).

    Raises:
        Nothing.
    """
    return _native.settings()


#: Whether ``atexit._run_exitfuncs()`` called from a handler runs the other
#: handlers once each and leaves nothing for the loop that called the handler:
#: true where Modules/atexitmodule.c iterates over its live array and skips
#: cleared slots (3.10-3.13, measured by tests/test_exit.py); false from 3.14,
#: which calls the handlers from a copy of the list (measured: each then runs
#: twice; tests/test_exit.py checks this fact too).
_ATEXIT_RUNS_LIVE_LIST = _sys.version_info < (3, 14)


def _register_exit_hook(sequence) -> None:
    """Arrange for ``sequence`` (the reference's exit sequence) to run late in
    the Python ``atexit`` phase: after every other handler where CPython
    allows it (3.10-3.13), otherwise at the position of the import.

    The host library's registration (``register_exit_sequence``,
    src/cpython/exit_phase.hpp), the same for every extension built on it.
    3.10-3.13: a threading-module exit callback (``threading._register_atexit``;
    those run in ``threading._shutdown``, before the ``atexit`` handlers)
    registers the hook with :mod:`atexit`, so it is the last registered and
    runs first.  The hook then runs every other handler itself
    (``atexit._run_exitfuncs``, which calls each once and empties the list;
    the nested call of the hook returns at once) and only then the exit
    sequence.  Both functions are private CPython APIs present from 3.9 to
    3.15; ``tests/test_exit.py`` checks the resulting order on every
    interpreter of the matrix.  An exception that ends ``threading._shutdown``
    before that callback runs (a Ctrl-C there) would skip it, so a fallback,
    a plain handler registered at the import, then runs the sequence at that
    position, as on 3.14+.

    3.14+: the atexit module runs its handlers from a copy of its list
    (``_ATEXIT_RUNS_LIVE_LIST``), so a nested ``atexit._run_exitfuncs`` would
    run each handler twice.  The sequence is registered at import, as a
    plain handler; handlers registered before the import run after it, and a
    graph they destroy gets the sequence's wait again at its destroy
    (``release_after_exit`` in reference/src/exit.cpp).  The same plain
    registration is used where ``threading._register_atexit`` is missing.

    Args:
        sequence (callable): no arguments; run once.

    Returns:
        None.

    Raises:
        Whatever importing or calling ``atexit``/``threading`` raises
        (nothing in practice).
    """
    _native._register_exit_hook(sequence)


if _native._has_exit_hook():
    # The reference, and cuda-core-1.2-fixed's exit fix (policy.hpp).
    _register_exit_hook(_native._exit_hook)
else:
    # The other comparison variants have no exit sequence; the same last-moment hook
    # only records the time, so that the Py_AtExit backstop can report how
    # long their window between finalization and Py_AtExit was.
    _register_exit_hook(_native._mark_atexit_end)

# Every variant: the host's and the simulated driver's thread-bound state is
# reset in a fork() child (the protocol itself is not touched).
_os_register_at_fork = getattr(__import__("os"), "register_at_fork", None)
if _os_register_at_fork is not None:
    _os_register_at_fork(after_in_child=_native._after_fork_child)
