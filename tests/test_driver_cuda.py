# SPDX-License-Identifier: Apache-2.0
"""The `cuda` driver on the real CUDA driver API (marker `gpu`).

Skips, naming the reason, where there is no driver or no GPU.  With
DC_GPU_REPORT=<path> it writes a JSON report: interpreter, driver version, GPU
name, counts, and the thread that ran the destructors next to the main
thread (CUDA may run a destructor synchronously inside cuGraphDestroy on the
main thread or on its internal thread; cuda-python issue #2042).  Source:
CUDA Driver API, cuUserObjectCreate
(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC), cuGraphRetainUserObject
(CU_GRAPH_USER_OBJECT_MOVE); cuda-python PR #2371.
"""

import json
import os
import platform
import sys
import threading
import time

import pytest

pytestmark = pytest.mark.gpu


def _wait_cleaned(dc, base, n, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while dc.counters()["cleaned"] - base < n:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def test_unavailable_is_a_clear_driver_error():
    import deferred_cleanup as dc

    try:
        dc.CudaDriver()
    except dc.DriverUnavailable as e:
        assert isinstance(e, dc.DriverError) and isinstance(e, RuntimeError)
        assert str(e).startswith("cuda driver: ")
    else:
        pytest.skip("a CUDA driver and GPU are present: nothing unavailable to report")


def test_cuda_user_objects_cleaned_on_main_thread(dc, cuda_driver, recorder):
    graphs_n, per_graph = 64, 16
    n = graphs_n * per_graph
    dc._native._test_reset_destructor_threads()
    before = dc.counters()
    graphs = []
    t0 = time.perf_counter()
    for k in range(graphs_n):
        g = cuda_driver.create_graph()
        for i in range(per_graph):
            g.attach(k * per_graph + i, recorder)
        if k % 2 == 0:
            # Also launched once, not waited for: its destructors run after completion.
            g.instantiate()
        graphs.append(g)
    for g in graphs:
        g.destroy()
    # Only sleeps (pending calls) and the final stats() entry point.
    ok = _wait_cleaned(dc, before["cleaned"], n)
    elapsed = time.perf_counter() - t0
    after = dc.stats()
    main = threading.main_thread().ident
    report = {
        "interpreter": (
            f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})"
        ),
        "variant": dc.variant(),
        "driver_version": cuda_driver.driver_version,
        "gpu": cuda_driver.device_name,
        "graphs": graphs_n,
        "user_objects": n,
        "instantiated_graphs": (graphs_n + 1) // 2,
        "cleaned": after["cleaned"] - before["cleaned"],
        "enqueued": after["enqueued"] - before["enqueued"],
        "pending_calls": after["pending_calls"] - before["pending_calls"],
        "drain_cycles": after["drain_cycles"] - before["drain_cycles"],
        "direct_drains": after["direct_drains"] - before["direct_drains"],
        "schedule_failures": after["schedule_failures"] - before["schedule_failures"],
        "destructor_threads": dc._native.destructor_threads(),
        "destructors_on_main_thread": after["destructors_on_main"] - before["destructors_on_main"],
        "main_thread": main,
        "cleanup_threads": sorted(recorder.threads),
        "seconds": round(elapsed, 3),
    }
    path = os.environ.get("DC_GPU_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
    assert ok, report
    assert recorder.calls == {i: 1 for i in range(n)}
    assert recorder.threads == {main}, "every cleanup runs on the main thread"
    # CUDA may run a destructor inside cuGraphDestroy on the calling thread or
    # later on its internal thread (cuda-python issue #2042); both are fine
    # for the queue, and the report records which happened.
    assert report["destructor_threads"], "no destructor thread recorded"
    assert report["enqueued"] == n
    assert (
        report["pending_calls"] <= report["drain_cycles"] + 1
    )  # at most one may still be outstanding


def test_cuda_bad_input(dc, cuda_driver):
    g = cuda_driver.create_graph()
    g.destroy()
    with pytest.raises(dc.GraphDestroyedError):
        g.destroy()
    with pytest.raises(dc.GraphDestroyedError):
        g.attach(object())


def test_cuda_spin_us_must_not_be_negative(dc):
    with pytest.raises(ValueError, match="spin_us"):
        dc.CudaDriver(spin_us=-1)


class _Payload:
    pass


def test_cuda_spin_kernel_keeps_the_payload_alive_for_the_launch(dc):
    """CudaDriver(spin_us=200000): the graph holds a 0.2 s spin kernel, so a
    payload attached to it is released no sooner than about 0.2 s after the
    launch, though the graph is destroyed at once (CUDA keeps the user objects
    of an executable graph alive until its launches complete)."""
    import weakref

    try:
        drv = dc.CudaDriver(spin_us=200_000)
    except dc.DriverUnavailable as e:
        pytest.skip(f"CUDA driver unavailable: {e}")
    released = []
    g = drv.create_graph()
    p = _Payload()
    weakref.finalize(p, lambda: released.append((time.perf_counter(), threading.get_ident())))
    g.attach(p)
    del p
    t0 = time.perf_counter()
    g.instantiate()
    g.destroy()
    deadline = t0 + 10.0
    while not released and time.perf_counter() < deadline:
        time.sleep(0.001)
    assert released, "the payload was not released within 10 s"
    delay = released[0][0] - t0
    assert delay >= 0.15, (
        f"released {delay * 1e3:.1f} ms after the launch: the spin kernel did not hold it"
    )
    assert delay < 5.0, f"released only {delay:.2f} s after the launch of a 0.2 s kernel"
    assert released[0][1] == threading.main_thread().ident
