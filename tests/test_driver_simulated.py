# SPDX-License-Identifier: Apache-2.0
"""The simulated driver: CUDA's user-object contract on any machine.

Source: CUDA Driver API (cuUserObjectCreate, cuGraphRetainUserObject with
CU_GRAPH_USER_OBJECT_MOVE, cuGraphInstantiate, cuGraphDestroy), simulated.
"""

import pytest


def test_hold_and_burst_release(dc, wait):
    driver = dc.SimulatedDriver()
    assert driver.name == "simulated"
    g = driver.create_graph()
    for i in range(1000):
        g.attach(i)
    driver.set_hold(True)
    g.destroy()
    assert driver.held == 1000
    assert driver.delivered == 0
    assert driver.release(8) == 1000
    assert driver.held == 0
    assert driver.wait_idle(10.0)
    assert driver.delivered == 1000
    assert driver.last_release_ns > 0
    assert driver.release(8) == 0, "nothing left to release"


def test_instantiated_graph_holds_a_second_reference(dc, wait, recorder):
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    g.attach("x", recorder)
    g.instantiate()
    g.instantiate()  # idempotent: still one executable graph
    g.destroy()
    assert driver.wait_idle(10.0)
    assert driver.delivered == 1
    assert wait(lambda: recorder.calls == {"x": 1})


def test_undestroyed_graph_is_released_when_its_object_dies(dc, wait, recorder):
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    g.attach("y", recorder)
    del g
    assert driver.wait_idle(10.0)
    assert wait(lambda: recorder.calls == {"y": 1})


def test_dropping_the_driver_delivers_held_calls(dc, wait, recorder):
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    g.attach("z", recorder)
    driver.set_hold(True)
    g.destroy()
    assert driver.held == 1
    del g, driver  # the driver goes away: held destructor calls are delivered, none lost
    assert wait(lambda: recorder.calls == {"z": 1})


def test_graphs_are_independent(dc, wait, recorder):
    driver = dc.SimulatedDriver()
    a, b = driver.create_graph(), driver.create_graph()
    a.attach("a", recorder)
    b.attach("b", recorder)
    a.destroy()
    assert driver.wait_idle(10.0)
    assert wait(lambda: recorder.calls == {"a": 1})
    assert "b" not in recorder.calls
    b.destroy()
    assert driver.wait_idle(10.0)
    assert wait(lambda: recorder.calls == {"a": 1, "b": 1})


def test_release_needs_at_least_one_thread(dc):
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    g.attach(0)
    driver.set_hold(True)
    g.destroy()
    with pytest.raises(ValueError, match=r"release\(threads\): must be from 1 to 1024"):
        driver.release(0)
    assert driver.held == 1, "a refused release must not drop the held destructor call"
    assert driver.release(1) == 1
    assert driver.wait_idle(10.0)


@pytest.mark.parametrize("threads", [1, 3, 16])
def test_burst_sizes(dc, wait, threads):
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    for i in range(257):
        g.attach(i)
    driver.set_hold(True)
    g.destroy()
    base = dc.counters()["cleaned"]
    assert driver.release(threads) == 257
    assert driver.wait_idle(10.0)
    assert wait(lambda: dc.counters()["cleaned"] - base == 257)
