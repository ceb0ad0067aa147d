# SPDX-License-Identifier: Apache-2.0
"""item.hpp: one preallocated item per user object; exactly-once cleanup.

Source: cuda-python PR #2371 (item allocated before the driver sees the user
object); docs/design/item.rst.
"""

import gc
import sys
import weakref

import pytest


class Payload:
    """A weak-referenceable payload."""


def test_attach_keeps_object_alive_until_user_object_dies(dc, wait):
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    obj = Payload()
    ref = weakref.ref(obj)
    g.attach(obj)
    del obj
    gc.collect()
    assert ref() is not None, "the graph's user object must keep the payload alive"
    g.destroy()
    assert driver.wait_idle(10.0)
    assert wait(lambda: ref() is None), "payload never released after the user object died"


def test_finalizer_receives_the_object_once(dc, wait, recorder):
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    g.attach(41, recorder)
    g.attach(42, recorder)
    g.destroy()
    assert driver.wait_idle(10.0)
    assert wait(lambda: len(recorder.order) == 2)
    assert recorder.calls == {41: 1, 42: 1}


def test_creation_failure_cleans_directly_exactly_once(dc, delta, recorder, wait):
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    obj = 7001
    d = delta()
    driver.fail_next_creates(1)
    with pytest.raises(dc.DriverError, match="released directly"):
        g.attach(obj, recorder)
    # Cleaned on the spot, by the main thread, without any destructor.
    assert recorder.calls == {obj: 1}
    assert d("direct_cleanups") == 1 and d("cleaned") == 1 and d("enqueued") == 0
    g.destroy()
    assert driver.wait_idle(10.0)
    dc.drain_now()
    assert recorder.calls == {obj: 1}, "cleaned twice"
    assert d("enqueued") == 0


def test_failed_handover_cleans_through_the_destructor_only(dc, delta, recorder, wait):
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    d = delta()
    driver.fail_next_retains(1)
    with pytest.raises(dc.DriverError, match="through the user object's destructor"):
        g.attach(7002, recorder)
    assert d("direct_cleanups") == 0
    assert driver.wait_idle(10.0)
    assert wait(lambda: recorder.calls.get(7002) == 1)
    assert d("enqueued") == 1 and d("cleaned") == 1
    g.destroy()
    assert driver.wait_idle(10.0)
    dc.drain_now()
    assert recorder.calls == {7002: 1}


def test_references_are_balanced(dc, wait):
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    obj = Payload()
    fin = lambda o: None  # noqa: E731
    base_obj, base_fin = sys.getrefcount(obj), sys.getrefcount(fin)
    g.attach(obj, fin)
    assert sys.getrefcount(obj) == base_obj + 1
    assert sys.getrefcount(fin) == base_fin + 1
    g.destroy()
    assert driver.wait_idle(10.0)
    assert wait(lambda: sys.getrefcount(obj) == base_obj)
    assert sys.getrefcount(fin) == base_fin
