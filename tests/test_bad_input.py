# SPDX-License-Identifier: Apache-2.0
"""Bad input and resource failures get a clear error, never undefined
behaviour, an abort or a payload cleaned twice."""

import subprocess
import sys
import textwrap
import threading

import pytest

BAD_TIMEOUTS = [float("inf"), float("-inf"), float("nan"), -1.0, 1e10]


@pytest.mark.parametrize("t", BAD_TIMEOUTS, ids=str)
def test_wait_idle_rejects_bad_timeouts(dc, t):
    d = dc.SimulatedDriver()
    with pytest.raises(ValueError, match="finite number of seconds"):
        d.wait_idle(t)


@pytest.mark.parametrize("t", BAD_TIMEOUTS + [0.0], ids=str)
def test_configure_rejects_bad_bounds(dc, t):
    before = dc.settings()
    with pytest.raises(ValueError):
        dc.configure(stale_claim_s=t)
    if t != 0.0:
        with pytest.raises(ValueError):
            dc.configure(exit_wait_s=t)
    assert dc.settings() == before, "a refused setting must not change anything"


def test_wait_idle_accepts_the_bounds(dc):
    d = dc.SimulatedDriver()
    assert d.wait_idle(0.0) is True
    assert d.wait_idle(365 * 24 * 3600.0) is True  # idle: returns at once


def _ten_held(dc, recorder):
    """A simulated driver holding the destructor calls of ten payloads
    (finalizer ``recorder``) of a destroyed graph."""
    d = dc.SimulatedDriver()
    g = d.create_graph()
    for i in range(10):
        g.attach(i, recorder)
    d.set_hold(True)
    g.destroy()
    return d


def test_release_with_no_thread_keeps_calls_held(dc, recorder, wait):
    d = _ten_held(dc, recorder)
    d._test_fail_thread_starts(100)
    with pytest.raises(dc.DriverError, match="nothing was released"):
        d.release(4)
    assert d.held == 10 and recorder.calls == {}
    d._test_fail_thread_starts(0)
    assert d.release(4) == 10
    assert d.wait_idle(10)
    assert wait(lambda: recorder.calls == {i: 1 for i in range(10)})


def test_release_with_fewer_threads_still_delivers_everything(dc, recorder, wait):
    d = _ten_held(dc, recorder)
    d._test_fail_thread_starts(100, after=2)  # two starts succeed, then every start fails
    with pytest.raises(dc.DriverError, match="started 2 of 4 threads"):
        d.release(4)
    d._test_fail_thread_starts(0)
    assert d.held == 0
    assert d.wait_idle(10)
    assert wait(lambda: recorder.calls == {i: 1 for i in range(10)}), (
        "every call is delivered by the two threads"
    )


def test_attach_cleans_once_when_the_error_message_cannot_be_built(dc, recorder, wait, delta):
    """bad_alloc while building the hand-over failure's message: nothing was
    released yet, so the payload is cleaned exactly once, here."""
    dlt = delta()
    d = dc.SimulatedDriver()
    g = d.create_graph()
    d.fail_next_retains(1)
    d._test_fail_message_alloc(1)
    with pytest.raises(MemoryError):
        g.attach(1, recorder)
    assert d.wait_idle(5)
    dc.drain_now()
    assert recorder.calls == {1: 1}
    assert dlt("cleaned") == 1


def test_refused_creation_off_the_main_thread_is_cleaned_on_the_main_thread(dc, recorder, wait):
    d = dc.SimulatedDriver()
    g = d.create_graph()
    d.fail_next_creates(1)
    errors = []

    def worker():
        try:
            g.attach(7, recorder)
        except dc.DriverError as e:
            errors.append(e)

    t = threading.Thread(target=worker)
    t.start()
    t.join(10)
    assert errors and "released" in str(errors[0])
    assert wait(lambda: recorder.calls == {7: 1})
    assert recorder.threads == {threading.main_thread().ident}, (
        "the finalizer ran off the main thread"
    )


def test_probe_thread_never_joined_does_not_abort_at_exit():
    code = textwrap.dedent("""
        import deferred_cleanup
        from deferred_cleanup import _native
        _native.probe.start_foreign_add(50)
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, (p.returncode, p.stderr)
