# SPDX-License-Identifier: Apache-2.0
"""Shared by the exit scenarios: a graph destroyed while its driver holds the
destructor calls back (not a scenario itself: the name starts with "_")."""

import deferred_cleanup as dc


def destroy_held(payloads, fin=None):
    """Attach each of ``payloads`` to a new graph of a new SimulatedDriver
    (with ``fin(payload)`` as its finalizer, or none), hold the driver's
    destructor calls, and destroy the graph.

    Args:
        payloads (iterable): the payload objects.
        fin (callable | None): the finalizer of each, or None.

    Returns:
        SimulatedDriver: its ``release(threads)`` makes the held calls due;
        ``held`` counts them.

    Raises:
        What ``attach`` and ``destroy`` raise (nothing here, before exit).
    """
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    for p in payloads:
        if fin is None:
            g.attach(p)
        else:
            g.attach(p, fin)
    driver.set_hold(True)
    g.destroy()
    return driver
