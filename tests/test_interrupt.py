"""KeyboardInterrupt and SystemExit raised by a cleanup reach the program
(host.cpp): the remaining cleanups still run exactly once, then the first
such exception is raised where the drain was entered: by the entry point
that drained, or by CPython in the code a pending call interrupted (the
pending call returns -1 with it set; Python/ceval_gil.c make_pending_calls,
v3.12.0).  Other exceptions go to sys.unraisablehook, as before.
"""
import signal
import threading
import time

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


def test_ctrl_c_during_a_long_drain_is_delivered_after_it(dc, recorder, lose_call):
    """A real SIGINT arrives while the 10th of 2000 finalizers runs."""

    def fin(i):
        recorder(i)
        if i == 10:
            signal.raise_signal(signal.SIGINT)  # Python's handler raises KeyboardInterrupt here

    lose_call(1)  # keep the pending call out of the way: the entry point drains
    _queue(dc, 2000, fin)
    with pytest.raises(KeyboardInterrupt):
        dc.drain_now()
    assert len(recorder.calls) == 2000 and set(recorder.calls.values()) == {1}, "every cleanup ran exactly once"
    assert dc.counters()["deferred_interrupts"] >= 1


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
    assert len(recorder.calls) == 10


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
        while time.monotonic() < deadline:  # plain Python: no entry point; the pending call interrupts it
            time.sleep(0.001)
    assert d.wait_idle(10)
    assert len(recorder.calls) == 5
    assert recorder.threads == {threading.main_thread().ident}


def test_ordinary_exceptions_still_go_to_unraisablehook(dc, recorder, monkeypatch, lose_call):
    seen = []
    monkeypatch.setattr("sys.unraisablehook", lambda u: seen.append(u.exc_type))

    def fin(i):
        recorder(i)
        raise ValueError(i)

    lose_call(1)
    _queue(dc, 3, fin)
    assert dc.drain_now() == 3
    assert seen == [ValueError] * 3
