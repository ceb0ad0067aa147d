"""Graph takes part in the garbage collector's protocol (api_bindings.cpp).

A payload that references its own graph forms a cycle through C++ (graph ->
user object -> payload -> object -> graph) that the collector sees only
because Graph's tp_traverse visits the payloads it owns; tp_clear destroys
the driver graph, and the payload is then released on the main thread like
any other.  Source: CPython Doc/c-api/gcsupport.rst; pybind11
custom_type_setup.
"""
import gc
import threading
import weakref


class Holder:
    pass


def test_payload_referencing_its_graph_is_collected_and_released(dc, recorder, wait, delta):
    dlt = delta()
    d = dc.SimulatedDriver()
    g = d.create_graph()
    h = Holder()
    h.graph = g
    g.attach(h, lambda o: recorder(id(o)))
    alive = weakref.ref(h)
    key = id(h)
    del g, h
    gc.collect()
    assert d.wait_idle(5)
    assert wait(lambda: recorder.calls == {key: 1}), "the cycle was never collected: payload not released"
    assert recorder.threads == {threading.main_thread().ident}
    assert wait(lambda: alive() is None)
    assert dlt("cleaned") == 1 and dlt("created") == 1


def test_live_graph_is_not_collected(dc, recorder):
    d = dc.SimulatedDriver()
    g = d.create_graph()
    h = Holder()
    g.attach(h, recorder)
    gc.collect()
    assert not g.destroyed and recorder.calls == {}
    g.destroy()
