# SPDX-License-Identifier: Apache-2.0
"""End-to-end measurements of deferred_cleanup on one CPython interpreter.

The functions here drive the real package (the simulated driver's threads are
native threads with no thread state, like CUDA's destructor thread) and are
shared by the pyperf runner (``e2e_pyperf.py``), the coalescing count
(``python e2e.py counts``) and the smoke test (``python e2e.py smoke``, run by
``tests/test_bench.py``).  The variant is the one chosen at import by
``DEFERRED_CLEANUP_VARIANT``; run one process per variant.

Usage::

    python tests/bench/e2e.py counts [--payloads N] [--big N]   # JSON on stdout
    python tests/bench/e2e.py smoke                              # JSON on stdout
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time

import deferred_cleanup as dc
from deferred_cleanup import _native

THREADS = 8  # simulated driver threads firing a burst together
STARVE_S = 3.0  # "entry" bursts: a spinning main thread that released nothing by then is starved


def _finalizer(obj: object) -> None:
    """The cleanup every payload gets: a Python call taking the payload."""


def _held_graph(n: int, finalizer=_finalizer):
    """A simulated driver holding back the destructor calls of ``n`` payloads.

    Args:
        n (int): payloads (distinct ``object()`` instances), >= 1.
        finalizer: called once with each payload when it is released.

    Returns:
        tuple: ``(driver, counters_before)``; ``driver.release(threads)``
        then fires the ``n`` destructor calls.

    Raises:
        deferred_cleanup.DriverError: the driver refused an attach.
    """
    dc.drain_now()
    driver = dc.SimulatedDriver()
    hold(driver, [object() for _ in range(n)], finalizer)
    return driver, dc.counters()


def hold(driver, payloads: list, finalizer) -> int:
    """One graph of ``driver`` with ``payloads`` attached, destroyed with its
    destructor calls held (``driver.release(threads)`` fires them).

    Args:
        driver (deferred_cleanup.SimulatedDriver): the driver; its hold is set.
        payloads (list): the payloads; emptied, so that the graph holds the
            last references.
        finalizer: called once with each payload when it is released.

    Returns:
        int: the payloads attached.

    Raises:
        deferred_cleanup.DriverError: the driver refused an attach.
    """
    graph = driver.create_graph()
    for p in payloads:
        graph.attach(p, finalizer)
    payloads.clear()
    driver.set_hold(True)
    graph.destroy()  # the user objects die; their destructor calls are held
    return graph.attached


def _delta(before: dict, after: dict) -> dict:
    keys = (
        "cleaned",
        "pending_calls",
        "drain_cycles",
        "direct_drains",
        "schedule_failures",
        "cleanups_off_main",
    )
    return {k: after[k] - before[k] for k in keys if k in after and k in before}


def burst(n: int, mode: str, timeout_s: float = 120.0, starve_s: float | None = None) -> dict:
    """Release ``n`` payloads from ``THREADS`` driver threads at once.

    Args:
        n (int): payloads, >= THREADS.
        mode (str): how the main thread waits. ``"pending"``: in
            ``time.sleep(0.0002)`` steps, calling no entry point, so the
            payloads arrive through pending calls only (as
            ``deferred_cleanup.reference_burst`` does); ``"entry"``: calling the
            entry point ``deferred_cleanup.poll()`` back to back, which drains
            directly on the main thread (reference) or retries scheduling.
        timeout_s (float): seconds to wait for the last cleanup.
        starve_s (float | None): in ``"entry"`` mode, give up spinning after
            this many seconds and report the burst as starved (the seed
            variant has no direct drain, and on 3.10-3.12 its pending call
            does not run while the main thread spins, gh-95820); the main
            thread then sleeps until the payloads are released.  None: no
            limit but ``timeout_s``.

    Returns:
        dict: ``starved`` (bool, ``"entry"`` mode gave up after
        ``starve_s``), ``seconds`` (float, from the burst's release to the last cleanup,
        both read from the native steady clock), ``payloads`` (int) and the
        counter deltas ``cleaned``, ``pending_calls``, ``drain_cycles``,
        ``direct_drains``, ``schedule_failures``, ``cleanups_off_main``.

    Raises:
        TimeoutError: not every payload was released within ``timeout_s``.
        ValueError: unknown mode.
    """
    if mode not in ("pending", "entry"):
        raise ValueError(f"mode must be 'pending' or 'entry', not {mode!r}")
    driver, before = _held_graph(n)
    target = before["cleaned"] + n
    released = driver.release(THREADS)
    deadline = time.monotonic() + timeout_s
    counters = dc.counters
    if mode == "pending":
        while counters()["cleaned"] < target:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"burst: {counters()['cleaned'] - before['cleaned']} of {n} released"
                )
            time.sleep(0.0002)
    starved = False
    if mode == "entry":
        poll = dc.poll
        give_up = time.monotonic() + (starve_s if starve_s is not None else timeout_s)
        while counters()["cleaned"] < target:
            poll()
            if time.monotonic() > give_up:
                starved = True
                break
    if mode == "pending" or starved:
        while counters()["cleaned"] < target:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"burst: {counters()['cleaned'] - before['cleaned']} of {n} released"
                )
            time.sleep(0.0002)
    driver.wait_idle(timeout_s)
    after = dc.counters()
    out = _delta(before, after)
    out["starved"] = starved
    out["payloads"] = released
    out["seconds"] = (_native.last_cleanup_ns() - driver.last_release_ns) / 1e9
    return out


def consume_queue(n: int, timeout_s: float = 120.0) -> float:
    """Main-thread CPU seconds spent releasing ``n`` payloads through the queue.

    The driver threads push all ``n`` items while the main thread blocks in
    ``wait_idle`` (GIL released, no CPU); then the pending call drains them.
    The main thread's CPU time (``time.thread_time``) from before the release
    to the last cleanup is the consumer's cost (it also holds the release
    call and a few counter reads: microseconds).

    Args:
        n (int): payloads, >= THREADS.
        timeout_s (float): seconds to wait.

    Returns:
        float: seconds of main-thread CPU time.

    Raises:
        TimeoutError: the payloads were not all released within ``timeout_s``.
    """
    driver, before = _held_graph(n)
    target = before["cleaned"] + n
    t0 = time.thread_time()
    driver.release(THREADS)
    driver.wait_idle(timeout_s)
    deadline = time.monotonic() + timeout_s
    while dc.counters()["cleaned"] < target:
        if time.monotonic() > deadline:
            raise TimeoutError("consume_queue: not every payload was released")
        time.sleep(0)  # back to the eval loop: the pending call runs
    t1 = time.thread_time()
    if dc.counters()["cleanups_off_main"] != before.get("cleanups_off_main", 0):
        raise AssertionError("a cleanup ran off the main thread")
    return t1 - t0


def consume_direct(n: int) -> float:
    """Main-thread CPU seconds running the same ``n`` cleanups directly.

    The same finalizer called with ``n`` distinct payloads from a C loop
    (``collections.deque(map(f, objs), maxlen=0)``), then the payloads
    dropped, as the drain drops each payload after its finalizer.

    Args:
        n (int): payloads.

    Returns:
        float: seconds of main-thread CPU time.

    Raises:
        nothing.
    """
    objs = [object() for _ in range(n)]
    t0 = time.thread_time()
    collections.deque(map(_finalizer, objs), maxlen=0)
    objs.clear()
    t1 = time.thread_time()
    return t1 - t0


def counts(payloads: int, big: int) -> dict:
    """Pending calls per burst: one burst of ``payloads`` in each wait mode and
    one of ``big`` payloads (pending-call mode), all from THREADS threads.

    Returns:
        dict: ``variant`` (str), ``python`` (str), and per burst the dict of
        :func:`burst`.

    Raises:
        TimeoutError: as :func:`burst`.
    """
    return {
        "variant": dc.variant(),
        "python": sys.version.split()[0],
        "burst_pending": burst(payloads, "pending"),
        "burst_entry": burst(payloads, "entry", starve_s=STARVE_S),
        "burst_big": burst(big, "pending"),
    }


def smoke() -> dict:
    """Each measurement once on small sizes; raises if a payload is lost.

    Returns:
        dict: the measurements.

    Raises:
        AssertionError: a burst did not release every payload on the main
            thread.
    """
    out = {"variant": dc.variant()}
    for mode in ("pending", "entry"):
        r = burst(1000, mode, starve_s=1.0)
        assert r["cleaned"] == 1000 and r["payloads"] == 1000, r
        assert r.get("cleanups_off_main", 0) == 0, r
        out[f"burst_{mode}"] = r
    out["consume_queue_s"] = consume_queue(1000)
    out["consume_direct_s"] = consume_direct(1000)
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("counts")
    c.add_argument("--payloads", type=int, default=100_000)
    c.add_argument("--big", type=int, default=1_000_000)
    sub.add_parser("smoke")
    a = ap.parse_args(argv)
    result = counts(a.payloads, a.big) if a.cmd == "counts" else smoke()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
