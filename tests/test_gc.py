# SPDX-License-Identifier: Apache-2.0
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
    assert wait(lambda: recorder.calls == {key: 1}), (
        "the cycle was never collected: payload not released"
    )
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


def _finalizer_cycles(recorder):
    """Finalizers that reference their own graph, while the object does not."""

    class Owner:
        def fin(self, o):
            recorder(("bound", o))

    def bound(g):
        owner = Owner()
        owner.graph = g
        return owner.fin

    def closure(g):
        def fin(o):
            recorder(("closure", o, g is not None))

        return fin

    def lam(g):
        return lambda o, g=g: recorder(("lambda", o))

    return {"bound": bound, "closure": closure, "lambda": lam}


def test_a_cycle_through_the_finalizer_alone_is_collected_and_released(dc, recorder, wait, delta):
    """The object is a plain int; only the finalizer (a bound method, a
    closure, a lambda) references the graph.  tp_traverse must visit the
    finalizer too, or the cycle graph -> payload -> finalizer -> graph is
    never found and the payload never released."""
    dlt = delta()
    d = dc.SimulatedDriver()
    gc.collect()
    makers = _finalizer_cycles(recorder)
    alive = []
    for make in makers.values():
        g = d.create_graph()
        g.attach(7, make(g))
        alive.append(weakref.ref(g))
        del g
    gc.collect()
    assert d.wait_idle(5)
    want = {("bound", 7): 1, ("closure", 7, True): 1, ("lambda", 7): 1}
    assert wait(lambda: recorder.calls == want), (
        f"cycles through a finalizer not collected: {recorder.calls}"
    )
    assert recorder.threads == {threading.main_thread().ident}
    gc.collect()
    assert wait(lambda: all(r() is None for r in alive)), (
        "a graph of a finalizer cycle is still alive"
    )
    assert dlt("cleaned") == 3
