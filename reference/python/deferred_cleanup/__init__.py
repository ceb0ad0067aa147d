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
    seq_cst on the store-buffering pairs, a Python ``atexit`` hook that closes
    the in-flight gate, waits out producers inside it and drains a last time,
    direct drains at entry points.
``seed``
    the design of cuda-python PR #2371 (cuda-core 1.2.0): acquire/release,
    ``Py_AtExit`` only, no gate wait, no final drain, no direct drain.  For
    comparison only.

Exceptions: :class:`DriverError` (a driver call failed), its subclass
:class:`DriverUnavailable` (no libcuda, no GPU, or built without ``cuda.h``),
:class:`ShutdownError` (the interpreter is exiting), :class:`NotMainThreadError`
and :class:`GraphDestroyedError`; all derive from :class:`RuntimeError`.
"""

from __future__ import annotations

import atexit as _atexit
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
    "drain_now",
    "poll",
    "reference_burst",
    "stats",
    "variant",
]


def variant() -> str:
    """Return the variant this process runs.

    Returns:
        str: ``"reference"`` or ``"seed"``, fixed at import from the
        environment variable ``DEFERRED_CLEANUP_VARIANT``.

    Raises:
        Nothing.
    """
    return _native.variant()


def stats() -> dict:
    """Return the queue's counters; an API entry point.

    On the main thread of the reference variant this first drains the queue
    directly when it is not empty (gh-95820); elsewhere it retries scheduling.

    Returns:
        dict: counts (``int``) ``created``, ``enqueued``, ``enqueued_late``,
        ``cleaned``, ``direct_cleanups``, ``schedule_attempts``,
        ``schedule_failures``, ``pending_calls``, ``drain_cycles``,
        ``pending_calls_ignored``, ``direct_drains``, ``retries``,
        ``leaked_at_shutdown``, ``gate_timeouts``, ``cleanups_on_main``,
        ``cleanups_off_main``, ``destructors_on_main``,
        ``cleanups_after_shutdown``, ``in_flight``; thread idents (``int``)
        ``main_thread`` and ``last_destructor_thread``; snapshots (``bool``)
        ``queue_empty``, ``scheduled``, ``accepting``, ``host_alive``; and
        ``variant`` (``str``).

    Raises:
        Nothing.  Errors raised by payload finalizers during the drain go to
        :func:`sys.unraisablehook`.
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

    Works in both variants (an explicit request, not the automatic entry-point
    drain).  Does not clear the scheduled flag, so an outstanding pending call
    stays the only one.

    Returns:
        int: number of cleanups run (0 when called from inside a cleanup).

    Raises:
        NotMainThreadError: called from a thread other than the main thread;
            nothing is drained or lost, the items stay queued.
        ShutdownError: called after the shutdown sequence ran.
    """
    return _native.drain_now()


def poll() -> str:
    """Run the entry-point step alone.

    Returns:
        str: ``"drained"`` (reference, main thread, queue not empty),
        ``"rescheduled"`` (seed, or off the main thread: a scheduling retry) or
        ``"nothing"``.

    Raises:
        Nothing.
    """
    return _native.poll()


def reference_burst(callbacks: int = 10000, threads: int = 8, timeout_s: float = 30.0) -> dict:
    """Measure the reference on one burst of destructor callbacks.

    Attaches ``callbacks`` payloads to one simulated graph, destroys it while
    the simulated driver holds the destructor calls back, then releases them
    all at once from ``threads`` native threads.  The main thread waits in
    ``time.sleep(0.0002)`` steps (dropping the GIL, calling no entry point), so
    the cleanups arrive through pending calls only.

    Args:
        callbacks (int): number of user objects (payloads), >= 1.
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
        ValueError: ``callbacks`` or ``threads`` below 1, or more threads
            than callbacks.
        TimeoutError: not every payload was cleaned within ``timeout_s``.
    """
    if callbacks < 1 or threads < 1:
        raise ValueError("callbacks and threads must be >= 1")
    if threads > callbacks:
        raise ValueError(f"threads ({threads}) must not exceed callbacks ({callbacks}): each thread fires at least one")
    drain_now()
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
            raise TimeoutError(f"reference_burst: {counters()['cleaned'] - before['cleaned']} of {callbacks} cleaned after {timeout_s} s")
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


if _native.variant() == "reference":
    # Registered at import, so it runs after every atexit handler registered
    # later (atexit is LIFO): user code that destroys graphs at exit still gets
    # its payloads cleaned.  See shutdown.hpp for the sequence.
    _atexit.register(_native._shutdown)
