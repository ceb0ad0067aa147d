# SPDX-License-Identifier: Apache-2.0
"""callback.hpp: the destructor only pushes and schedules.

The destructor runs on a driver thread with no Python thread state; the
cleanup runs on the main thread.  Source: cuda-python PR #2371; CUDA Driver
API cuUserObjectCreate (CU_USER_OBJECT_NO_DESTRUCTOR_SYNC).
"""

import threading


def test_destructor_on_driver_thread_cleanup_on_main(dc, delta, recorder, wait):
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    d = delta()
    for i in range(64):
        g.attach(i, recorder)
    g.destroy()
    assert driver.wait_idle(10.0)
    assert wait(lambda: len(recorder.order) == 64)
    c = dc.counters()
    assert recorder.threads == {threading.main_thread().ident}
    assert c["last_destructor_thread"] not in (0, c["main_thread"])
    assert d("destructors_on_main") == 0
    assert d("cleanups_off_main") == 0
    assert d("enqueued") == 64 and d("cleaned") == 64


def test_destructor_from_a_python_thread_still_cleans_on_main(dc, recorder, wait):
    """Destroying from a non-main Python thread: destroy() there can only retry
    scheduling; the cleanup still runs on the main thread."""
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    for i in range(10):
        g.attach(i, recorder)
    t = threading.Thread(target=g.destroy)
    t.start()
    t.join(10.0)
    assert not t.is_alive()
    assert driver.wait_idle(10.0)
    assert wait(lambda: len(recorder.order) == 10)
    assert recorder.threads == {threading.main_thread().ident}


def test_every_enqueue_is_one_destructor_call(dc, delta, wait):
    driver = dc.SimulatedDriver()
    d = delta()
    graphs = [driver.create_graph() for _ in range(50)]
    for k, g in enumerate(graphs):
        for i in range(k % 5 + 1):
            g.attach((k, i))
    created = d("created")
    assert created == sum(k % 5 + 1 for k in range(50))
    g0 = graphs[0]
    g0.instantiate()  # an executable graph holds a second reference: still one destructor call
    for g in graphs:
        g.destroy()
    assert driver.wait_idle(10.0)
    assert driver.delivered == created
    assert wait(lambda: d("cleaned") == created)
    assert d("enqueued") == created


def test_a_destructor_run_inside_destroy_on_the_main_thread_still_defers_the_cleanup(
    dc, delta, wait
):
    """cuGraphDestroy may run the destructor callback synchronously, on the
    thread that drops the last reference (notes/gpu-run.md saw it on the main
    thread; cuda-python #2042).  The callback still only pushes and
    schedules: each payload is released later, by a drain on the main thread,
    never while destroy() runs (docs Caveats, "Destructors may run on the
    releasing thread")."""
    driver = dc.SimulatedDriver()
    driver.set_synchronous(True)
    g = driver.create_graph()
    seen = []

    def fin(i):
        seen.append((i, driver.destroys_running, threading.get_ident()))

    for i in range(8):
        g.attach(i, fin)
    d = delta()
    g.destroy()
    # Every destructor call ran inside destroy() (the driver counted them
    # before it returned), and none of their payloads was released there.
    assert driver.delivered == 8 and driver.destroys_running == 0
    assert wait(lambda: len(seen) == 8), seen
    assert d("destructors_on_main") == 8  # counted by each cleanup: they ran on this thread
    inside = [i for i, running, _ in seen if running]
    assert inside == [], f"payloads {inside} were released inside destroy()"
    assert {t for *_, t in seen} == {threading.main_thread().ident}
    assert sorted(i for i, *_ in seen) == list(range(8))
    assert d("cleaned") == 8 and d("direct_cleanups") == 0
