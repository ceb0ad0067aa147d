# SPDX-License-Identifier: Apache-2.0
"""KeyboardInterrupt and SystemExit raised by a cleanup reach the program
(host.cpp): the remaining cleanups still run exactly once, then the first
such exception is raised where the drain was entered: by the entry point
that drained, or by CPython in the code a pending call interrupted (the
pending call returns -1 with it set; Python/ceval_gil.c make_pending_calls,
v3.12.0).  Other exceptions go to sys.unraisablehook, as before.
"""

import functools
import operator
import signal
import sys
import threading
import time
import types

import pytest


def _queue(dc, n, fin):
    d = dc.SimulatedDriver()
    g = d.create_graph()
    for i in range(n):
        g.attach(i, fin)
    d.set_hold(True)
    g.destroy()
    d.release(1)
    assert d.wait_idle(10)
    return d


@pytest.fixture
def python_sigint_handler():
    """Python's own SIGINT handler for the test, then the one found restored."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


@pytest.mark.test_hooks
def test_ctrl_c_in_a_finalizer_stops_the_drain_and_leaves_the_rest_queued(
    dc, recorder, lose_call, python_sigint_handler
):
    """A real SIGINT raised while the 11th of 2000 finalizers runs stops the
    drain there (docs: Caveats, the early stop): drain_now() raises
    KeyboardInterrupt with 11 cleanups run; the other 1989 stay queued and
    the next drain releases them, each exactly once.

    Python's own handler is installed for the test: a process started in the
    background by a shell without job control inherits SIGINT ignored, and
    Python then keeps it ignored (Modules/signalmodule.c, v3.12.0), so the
    signal would raise nothing."""

    def fin(i):
        recorder(i)
        if i == 10:
            signal.raise_signal(signal.SIGINT)  # Python's handler raises KeyboardInterrupt here

    lose_call(1)  # keep the pending call out of the way: the entry point drains
    _queue(dc, 2000, fin)
    with pytest.raises(KeyboardInterrupt):
        dc.drain_now()
    assert len(recorder.calls) == 11, "the drain stops after the cleanup that raised"
    assert not dc.counters()["queue_empty"], "the rest stays queued"
    assert dc.drain_now() == 1989
    assert len(recorder.calls) == 2000 and set(recorder.calls.values()) == {1}, (
        "every cleanup ran exactly once"
    )
    assert dc.counters()["deferred_interrupts"] >= 1


def test_sigint_during_a_slow_drain_arrives_at_once_and_the_pending_call_finishes_it(
    dc, recorder, python_sigint_handler
):
    """SIGINT sent to the main thread from another thread while a pending call
    drains 200 cleanups of 10 ms each (2 s): the KeyboardInterrupt reaches the
    interrupted code with at most one cleanup started after the signal was
    sent (the one it interrupts, or the next whose first bytecode raises),
    not after the whole drain; the rest stay queued with a pending call
    re-armed, which releases them without any entry point, each exactly once,
    on the main thread.  Counting cleanups instead of milliseconds keeps the
    rule independent of the machine's load; the 60 s deadlines, and 30 s
    without a cleanup while the rest should drain, are hang guards."""
    n = 200
    starts = []
    main = threading.main_thread().ident

    def fin(i):
        # When it started, and how many interrupts had been delivered by then
        # (counters() only reads): the re-armed pending call may run the rest
        # before the handler's first line (3.10 checks the eval breaker there).
        starts.append((time.monotonic(), dc.counters()["deferred_interrupts"]))
        recorder(i)
        time.sleep(0.01)  # a slow cleanup; drops the GIL, so the sender runs

    d = _held_graph(dc, n, fin)
    sent = []

    def sender():
        deadline = time.monotonic() + 60
        while len(starts) < 5 and time.monotonic() < deadline:
            time.sleep(0.001)
        signal.pthread_kill(main, signal.SIGINT)
        sent.append(time.monotonic())

    t = threading.Thread(target=sender)
    before = dc.counters()
    caught = None
    deadline = time.monotonic() + 60
    t.start()
    try:
        d.release(1)  # not an entry point: the destructors push and add the pending call
        while time.monotonic() < deadline:  # plain Python: the pending call drains here
            time.sleep(0.001)
    except KeyboardInterrupt:
        caught = time.monotonic()
    t.join(60)
    assert caught is not None and sent, "KeyboardInterrupt reached the interrupted code"
    delivered = before["deferred_interrupts"]
    before_delivery = [t for t, k in starts if k == delivered]
    after_signal = sum(1 for t in before_delivery if t > sent[0])
    assert after_signal <= 1, (
        f"{after_signal} cleanups started after SIGINT was sent and before the "
        f"KeyboardInterrupt was delivered (of {len(before_delivery)} before it)"
    )
    assert len(before_delivery) < n, "the drain stopped early"
    seen, progress = len(recorder.calls), time.monotonic()
    while len(recorder.calls) < n and time.monotonic() < deadline + 60:
        time.sleep(0.001)  # plain Python again: only the re-armed pending call can drain
        if len(recorder.calls) != seen:
            seen, progress = len(recorder.calls), time.monotonic()
        elif time.monotonic() - progress > 30:
            break  # hang guard: no cleanup for 30 s (each takes 10 ms): nothing drains the rest
    assert d.wait_idle(10)
    after = dc.counters()
    assert recorder.calls == {i: 1 for i in range(n)}, "every cleanup ran exactly once"
    assert recorder.threads == {main}
    assert after["direct_drains"] == before["direct_drains"], "no entry point drained"
    assert after["deferred_interrupts"] - before["deferred_interrupts"] == 1


@pytest.mark.test_hooks
def test_system_exit_in_a_finalizer_reaches_the_program(dc, recorder, lose_call):
    def fin(i):
        recorder(i)
        if i == 3:
            raise SystemExit(7)

    lose_call(1)
    _queue(dc, 10, fin)
    with pytest.raises(SystemExit) as e:
        dc.stats()
    assert e.value.code == 7
    assert len(recorder.calls) == 4, "the drain stops after the cleanup that raised"
    assert dc.drain_now() == 6
    assert recorder.calls == {i: 1 for i in range(10)}, "the rest ran later, once each"


def test_interrupt_from_a_pending_call_is_raised_in_the_interrupted_code(dc, recorder):
    """The pending call's KeyboardInterrupt surfaces in the plain Python loop it interrupted.

    The destructor calls are held until the ``with`` is entered, so nothing can
    be queued (and no pending call can raise) before pytest.raises is armed:
    under load the pending call used to run inside g.destroy(), outside the
    ``with``, and the KeyboardInterrupt aborted the whole pytest session.
    """

    def fin(i):
        recorder(i)
        if i == 0:
            raise KeyboardInterrupt

    d = dc.SimulatedDriver()
    g = d.create_graph()
    for i in range(5):
        g.attach(i, fin)
    d.set_hold(True)
    g.destroy()  # the five destructor calls are held: nothing is queued yet
    assert d.held == 5 and not recorder.calls
    deadline = time.monotonic() + 10
    with pytest.raises(KeyboardInterrupt):
        d.release(1)  # not an entry point: the destructors push and add the pending call
        while (
            time.monotonic() < deadline
        ):  # plain Python: no entry point; the pending call interrupts it
            time.sleep(0.001)
    assert d.wait_idle(10)
    assert len(recorder.calls) == 5
    assert recorder.threads == {threading.main_thread().ident}


@pytest.mark.test_hooks
def test_ordinary_exceptions_still_go_to_unraisablehook(dc, recorder, monkeypatch, lose_call):
    seen = []
    monkeypatch.setattr("sys.unraisablehook", lambda u: seen.append(u.exc_type))

    def fin(i):
        recorder(i)
        raise ValueError(i)

    lose_call(1)
    _queue(dc, 3, fin)
    before = dc.counters()
    assert dc.drain_now() == 3
    assert seen == [ValueError] * 3
    after = dc.counters()
    # The interrupt counters count interrupts only (Caveats): an ordinary
    # cleanup error is neither delivered nor an interrupt reported as unraisable.
    for name in ("interrupts_unraisable", "deferred_interrupts"):
        assert after[name] == before[name], (name, before[name], after[name])


# ---------------------------------------------------------------- several interrupts in one drain
#
# The rule (docs/caveats.rst): of the KeyboardInterrupt/SystemExit raised by
# cleanups while a drain runs, the first is raised where the outermost drain
# was entered; each later one goes to sys.unraisablehook.  None of these
# tests uses a test hook: the destructor calls are released and drain_now()
# is called at once, so the pending call they add may run inside a cleanup
# (the nested case that used to hand the first exception to that cleanup).

_TWO = {
    "ki_ki": (KeyboardInterrupt, KeyboardInterrupt),
    "ki_exit4": (KeyboardInterrupt, lambda: SystemExit(4)),
    "exit4_ki": (lambda: SystemExit(4), KeyboardInterrupt),
}


def _raising_fin(recorder, raises):
    """A finalizer for payloads 0..N: payload i raises raises[i] (a class or a factory)
    and spends a little Python time first, so that the eval breaker is checked."""

    def fin(i):
        recorder(i)
        time.sleep(0.0002)  # drops the GIL: on 3.10-3.12 the eval breaker is recomputed (gh-95820)
        sum(range(2000))  # Python bytecode: a pending call may run here
        if i in raises:
            raise raises[i]()

    return fin


def _held_graph(dc, n, fin):
    d = dc.SimulatedDriver()
    g = d.create_graph()
    for i in range(n):
        g.attach(i, fin)
    d.set_hold(True)
    g.destroy()
    assert d.held == n
    return d


def _drain_all(dc, d, recorder, n, via):
    """Release the held destructor calls and drain until all n cleanups ran.

    via="drain_now": call drain_now() at once (the pending call the destructors
    add may then run inside one of its cleanups); via="pending": plain Python
    only, so the pending call drains.  A drain stops at the first interrupt
    and re-arms the pending call for the rest, which may deliver the next one
    anywhere in this code: everything runs inside one loop that catches them.
    Returns the KeyboardInterrupt/SystemExit instances raised to this code,
    in order (each caught here: none escapes).
    """
    caught = []
    deadline = time.monotonic() + 20
    state = {"released": False}

    def body():
        if not state["released"]:
            state["released"] = True
            d.release(1)  # not an entry point; the destructors push and add the call
            if via == "drain_now":
                dc.drain_now()  # at once: destructors may still be pushing
        while len(recorder.calls) < n and time.monotonic() < deadline:
            time.sleep(0.001)  # plain Python: the pending call may run here
        assert d.wait_idle(10)
        while len(recorder.calls) < n and time.monotonic() < deadline:
            dc.drain_now()

    def attempt():
        while True:
            try:
                body()
                return
            except (KeyboardInterrupt, SystemExit) as e:
                caught.append(e)

    # The pending call re-armed after an interrupt can raise the next one at
    # any eval-breaker check here too: at attempt()'s loop jump (outside its
    # try), or (3.10) at its handler's first instruction, before the handler
    # bound the first, which is then the new one's context.  Each interrupt
    # escapes at most one level, and there are at most two.
    for _ in range(3):
        try:
            attempt()
            break
        except (KeyboardInterrupt, SystemExit) as e:
            first = e.__context__
            if isinstance(first, (KeyboardInterrupt, SystemExit)) and first not in caught:
                caught.append(first)
            caught.append(e)
    return caught


@pytest.mark.parametrize("via", ["drain_now", "pending"])
@pytest.mark.parametrize("case", sorted(_TWO))
def test_two_interrupts_are_never_lost(dc, recorder, monkeypatch, case, via):
    """Two cleanups raise KeyboardInterrupt/SystemExit(4).  The program sees
    the first; the second is reported to sys.unraisablehook when both ran in
    one drain, or raised too when they ran in two drains (the first stops its
    drain, so here they do).  Never neither."""
    first, second = _TWO[case]
    unraisable = []
    monkeypatch.setattr("sys.unraisablehook", lambda u: unraisable.append(u.exc_type))
    n = 40
    d = _held_graph(dc, n, _raising_fin(recorder, {1: first, 3: second}))
    before = dc.counters()
    caught = _drain_all(dc, d, recorder, n, via)
    after = dc.counters()
    kinds = [type(e) for e in caught]
    want = [
        KeyboardInterrupt if first is KeyboardInterrupt else SystemExit,
        KeyboardInterrupt if second is KeyboardInterrupt else SystemExit,
    ]
    assert recorder.calls == {i: 1 for i in range(n)}, "every cleanup ran exactly once"
    assert recorder.threads == {threading.main_thread().ident}
    assert kinds[:1] == want[:1], (
        f"the first is raised to the program: raised {kinds}, unraisable {unraisable}"
    )
    assert kinds + unraisable == want, f"raised {kinds}, unraisable {unraisable}"
    assert [e.code for e in caught if isinstance(e, SystemExit)] == [4] * kinds.count(SystemExit)
    assert after["deferred_interrupts"] - before["deferred_interrupts"] == len(kinds)
    assert after["interrupts_unraisable"] - before["interrupts_unraisable"] == len(unraisable)


@pytest.mark.parametrize("entry", ["stats", "poll", "drain_now", "graph", "unraisablehook"])
def test_an_entry_point_inside_a_cleanup_does_not_take_the_interrupt(
    dc, recorder, monkeypatch, entry
):
    """Cleanup 1's finalizer raises KeyboardInterrupt; then, in the same
    cleanup, its payload's ``__del__`` calls an entry point (or raises an
    ordinary error whose hook calls one).  The drain stops only after that
    cleanup, so the interrupt is saved and not yet delivered there: the entry
    point must not raise it inside the cleanup.  It is raised once, where the
    drain was entered."""
    unraisable = []
    inner = []
    side = dc.SimulatedDriver()

    def hook(u):
        unraisable.append(u.exc_type)
        if entry == "unraisablehook":  # a hook that logs the counters: stats() is an entry point
            try:
                dc.stats()
            except BaseException as e:  # noqa: BLE001 - raised here, CPython would drop it
                inner.append(type(e))

    monkeypatch.setattr("sys.unraisablehook", hook)

    def call_entry():
        if entry == "graph":
            side.create_graph().destroy()
        else:
            getattr(dc, entry)()

    class Payload:
        def __init__(self, i):
            self.i = i

        def __del__(self):  # runs in the cleanup, after its finalizer
            if self.i != 1:
                return
            if entry == "unraisablehook":
                # An ordinary error reported to the hook from inside the
                # cleanup (CPython's own report of a __del__ error may go to
                # pytest's hook instead, so the hook is called as CPython would).
                sys.unraisablehook(types.SimpleNamespace(exc_type=ValueError))
                return
            done.append(self.i)
            try:
                call_entry()
            except BaseException as e:  # noqa: BLE001 - what the cleanup saw is the point
                inner.append(type(e))

    def fin(p):
        i = p.i
        del p  # the KeyboardInterrupt's traceback must not keep the payload alive
        recorder(i)
        if i == 1:
            raise KeyboardInterrupt

    done = []
    n = 5
    d = dc.SimulatedDriver()
    g = d.create_graph()
    for i in range(n):
        g.attach(Payload(i), fin)  # the payload holds the only reference
    d.set_hold(True)
    g.destroy()
    assert d.held == n
    before = dc.counters()
    caught = _drain_all(dc, d, recorder, n, "drain_now")
    assert inner == [], f"the entry point inside the cleanup raised {inner}"
    assert done == ([] if entry == "unraisablehook" else [1]), "witness: __del__ ran"
    assert recorder.calls == {i: 1 for i in range(n)}
    assert [type(e) for e in caught] == [KeyboardInterrupt]
    assert unraisable == ([ValueError] if entry == "unraisablehook" else [])
    assert dc.counters()["deferred_interrupts"] - before["deferred_interrupts"] == 1


def test_a_pending_call_inside_a_cleanup_does_not_take_the_interrupt(dc, recorder, monkeypatch):
    """The one payload's finalizer raises KeyboardInterrupt; then, in the same
    cleanup, the payload's ``__del__`` waits, dropping the GIL, until the
    pending call the destructor added has run inside it.  That nested pending
    call must not raise the saved interrupt in ``__del__`` (nor raise it
    twice: once there, once more by the drain).

    No bytecode runs between the release and the cleanup, so the pending call
    cannot run earlier, on any version: release(), wait_idle() and then
    _native.drain_now() are called from C (map over callables built before
    the release), and the finalizer is C (signal.default_int_handler raises
    KeyboardInterrupt).  Had a bytecode run between them, the destructor's
    pending call could run there and be the outermost drain itself, and the
    test would pass with the nested rule broken; ``outer`` witnesses that
    drain_now() was the drain running the cleanup."""
    unraisable = []
    entered = []
    outer = []
    monkeypatch.setattr("sys.unraisablehook", lambda u: unraisable.append(u.exc_type))
    inner = []
    nested = []

    base = []

    class Payload:
        def __del__(self):
            # The pending call may already run at this function's first
            # bytecode (the eval breaker is checked on entry): still inside
            # the cleanup.
            try:
                outer.append(list(entered))
                recorder(1)
                deadline = time.monotonic() + 10
                while dc.counters()["drain_cycles"] == base[0] and time.monotonic() < deadline:
                    time.sleep(
                        0.0005
                    )  # drops the GIL: on 3.10-3.12 the call runs when it is taken back
                nested.append(dc.counters()["drain_cycles"] - base[0])
            except BaseException as e:  # noqa: BLE001 - what the cleanup saw is the point
                inner.append(type(e))

    d = dc.SimulatedDriver()
    g = d.create_graph()
    # C finalizer: raises at once; the payload holds the only reference.
    g.attach(Payload(), functools.partial(signal.default_int_handler, signal.SIGINT))
    d.set_hold(True)
    g.destroy()
    before = dc.counters()
    base.append(before["drain_cycles"])
    caught = []
    steps = [
        functools.partial(d.release, 1),
        functools.partial(d.wait_idle, 10),
        functools.partial(entered.append, "drain_now"),
        dc._native.drain_now,
    ]
    try:
        list(map(operator.methodcaller("__call__"), steps))
    except (KeyboardInterrupt, SystemExit) as e:
        caught.append(e)
    after = dc.counters()
    assert outer == [["drain_now"]], f"witness: drain_now() ran the cleanup: {outer}"
    assert inner == [], f"the pending call inside the cleanup raised {inner}"
    assert nested == [1], f"witness: the pending call ran inside the cleanup: {nested}"
    assert [type(e) for e in caught] == [KeyboardInterrupt] and unraisable == []
    assert recorder.calls == {1: 1} and after["cleaned"] - before["cleaned"] == 1
    assert recorder.threads == {threading.main_thread().ident}
    assert after["deferred_interrupts"] - before["deferred_interrupts"] == 1
