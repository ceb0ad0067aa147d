# SPDX-License-Identifier: Apache-2.0
"""The Python API: names, bad input, reference_burst.

Bad input gets a clear exception and nothing is lost or cleaned twice
(each entry point's Raises: section, docs/api/python.rst).
"""

import sys
import threading

import pytest


def test_public_names(dc):
    for name in [
        "SimulatedDriver",
        "CudaDriver",
        "Graph",
        "Driver",
        "stats",
        "counters",
        "drain_now",
        "poll",
        "variant",
        "reference_burst",
        "DriverError",
        "DriverUnavailable",
        "ShutdownError",
        "NotMainThreadError",
        "GraphDestroyedError",
    ]:
        assert hasattr(dc, name), name
    for exc in [
        dc.DriverError,
        dc.DriverUnavailable,
        dc.ShutdownError,
        dc.NotMainThreadError,
        dc.GraphDestroyedError,
    ]:
        assert issubclass(exc, RuntimeError)
    assert issubclass(dc.DriverUnavailable, dc.DriverError)


def test_stats_keys(dc):
    s = dc.stats()
    for key in [
        "enqueued",
        "cleaned",
        "schedule_attempts",
        "schedule_failures",
        "pending_calls",
        "drain_cycles",
        "direct_drains",
        "leaked_at_shutdown",
    ]:
        assert isinstance(s[key], int) and s[key] >= 0, key
    assert s["schedule_attempts"] == s["pending_calls"] + s["schedule_failures"]


def test_destroy_twice(dc, recorder, wait):
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    g.attach(1, recorder)
    g.destroy()
    assert g.destroyed
    with pytest.raises(dc.GraphDestroyedError, match="twice"):
        g.destroy()
    assert driver.wait_idle(10.0)
    assert wait(lambda: recorder.calls == {1: 1})
    dc.drain_now()
    assert recorder.calls == {1: 1}, "cleaned twice"


def test_attach_to_destroyed_graph(dc, delta):
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    g.destroy()
    obj = object()
    before = sys.getrefcount(obj)
    d = delta()
    with pytest.raises(dc.GraphDestroyedError, match="not retained"):
        g.attach(obj)
    assert sys.getrefcount(obj) == before
    assert d("created") == 0 and d("cleaned") == 0


def test_instantiate_destroyed_graph(dc):
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    g.destroy()
    with pytest.raises(dc.GraphDestroyedError):
        g.instantiate()


def test_finalizer_must_be_callable(dc, delta):
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    d = delta()
    with pytest.raises(TypeError, match="callable"):
        g.attach(object(), 42)
    assert d("created") == 0
    g.destroy()


def test_drain_now_from_thread(dc):
    errs = []
    t = threading.Thread(
        target=lambda: errs.append(pytest.raises(dc.NotMainThreadError, dc.drain_now))
    )
    t.start()
    t.join(10.0)
    assert len(errs) == 1


def test_cuda_driver_unavailable_or_working(dc):
    try:
        d = dc.CudaDriver()
    except dc.DriverUnavailable as e:
        assert "cuda driver:" in str(e)
    else:
        assert d.name == "cuda"
        assert d.driver_version > 0 and d.device_name


def test_reference_burst(dc):
    r = dc.reference_burst(callbacks=10_000, threads=8)
    assert set(r) >= {"payloads", "cleaned", "pending_calls", "drain_cycles", "delay_ms"}
    assert r["payloads"] == 10_000 and r["cleaned"] == 10_000
    assert 1 <= r["pending_calls"] <= r["drain_cycles"]
    assert r["schedule_failures"] == 0
    assert r["delay_ms"] >= 0


def test_reference_burst_rejects_bad_arguments(dc):
    with pytest.raises(ValueError):
        dc.reference_burst(callbacks=0)
    with pytest.raises(ValueError):
        dc.reference_burst(threads=0)
    with pytest.raises(ValueError, match="must not exceed callbacks"):
        dc.reference_burst(callbacks=1, threads=2)


def test_simulated_driver_rejects_bad_arguments(dc):
    drv = dc.SimulatedDriver()
    with pytest.raises(ValueError):
        drv.release(0)
    with pytest.raises(ValueError):
        drv.wait_idle(-1.0)
    with pytest.raises(ValueError):
        drv.wait_idle(float("nan"))
    with pytest.raises(ValueError):
        drv.fail_next_creates(-3)
    with pytest.raises(ValueError):
        drv.fail_next_retains(-1)
    # Nothing was armed by the refused calls: an attach still succeeds.
    g = drv.create_graph()
    g.attach(object())
    g.destroy()
    assert drv.wait_idle(10.0)


SUBINTERP_SCRIPT = r"""
import json, sys
import deferred_cleanup as dc
import _testcapi
code = (
    "import sys\n"
    "try:\n"
    "    import deferred_cleanup\n"
    "    sys.stdout.write('SUB imported\\n')\n"
    "except ImportError as e:\n"
    "    sys.stdout.write('SUB ImportError ' + str(e).split(':')[0] + '\\n')\n"
)
sys.stdout.flush()
rc = _testcapi.run_in_subinterp(code)
sys.stdout.flush()
drv = dc.SimulatedDriver()
g = drv.create_graph()
g.attach(object())   # raises ShutdownError if the subinterpreter closed the queue
g.destroy()
assert drv.wait_idle(10.0)
dc.drain_now()
print("MAIN", json.dumps({"rc": rc, "cleaned": dc.stats()["cleaned"]}))
"""


@pytest.mark.timeout(60)
def test_import_in_a_subinterpreter_is_refused_and_leaves_the_queue_alone():
    """The queue is process-wide: an import in a subinterpreter must raise
    ImportError (not hang, not register a second atexit hook that would close
    the queue when the subinterpreter ends), and the main interpreter keeps
    working afterwards."""
    import subprocess

    try:
        import _testcapi  # noqa: F401
    except ImportError:
        pytest.skip(
            (
                "this interpreter ships no _testcapi, so no legacy subinterpreter can be made "
                "from Python"
            )
        )
    p = subprocess.run(
        [sys.executable, "-c", SUBINTERP_SCRIPT], capture_output=True, text=True, timeout=45
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert (
        "SUB ImportError deferred_cleanup can only be imported in the main interpreter" in p.stdout
    ), p.stdout
    main = [line for line in p.stdout.splitlines() if line.startswith("MAIN ")]
    assert main and '"cleaned": 1' in main[0], p.stdout


@pytest.mark.test_hooks
def test_counters_drains_and_schedules_nothing(dc, recorder, wait, lose_call):
    """counters() is a snapshot, not an entry point: with items queued and
    their pending call lost, it runs no cleanup and adds no pending call; the
    next entry point (stats()) then releases them on the main thread."""
    old = dc.settings()["stale_claim_s"]
    dc.configure(stale_claim_s=30.0)  # no producer re-arms the lost call on a slow machine
    try:
        lose_call(1)
        d = dc.SimulatedDriver()
        g = d.create_graph()
        for i in range(5):
            g.attach(i, recorder)
        d.set_hold(True)
        g.destroy()
        d.release(1)
        assert d.wait_idle(10.0)
        first = dc.counters()
        assert first["scheduled"] and not first["queue_empty"]
        for _ in range(20):
            again = dc.counters()
        assert recorder.calls == {}, "counters() ran cleanups"
        for key in ("cleaned", "schedule_attempts", "rearms", "direct_drains"):
            assert again[key] == first[key], key
    finally:
        dc.configure(stale_claim_s=old)
    dc.stats()
    assert recorder.calls == {i: 1 for i in range(5)}
    assert recorder.threads == {threading.main_thread().ident}
