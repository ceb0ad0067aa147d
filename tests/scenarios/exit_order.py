# SPDX-License-Identifier: Apache-2.0
"""Scenario: every atexit handler runs exactly once, and the payloads of the
graphs each destroys are released, whatever the order of registration.

usage: exit_order.py LOG
Handlers registered before the import, after it, from a weakref.finalize
and from inside another handler append their name to LOG.  Each also
destroys a graph of 3 payloads whose finalizers append "cleaned:<name>".
"""

import atexit
import sys
import weakref

log_path = sys.argv[1]
graphs = {}


def log(line):
    with open(log_path, "a") as f:
        f.write(line + "\n")


def handler(name):
    def run():
        log(name)
        g = graphs.get(name)
        if g is not None:
            g.destroy()

    return run


class Anchor:
    pass


atexit.register(handler("before-import"))
anchor = Anchor()
weakref.finalize(anchor, handler("finalize-before-import"))

import deferred_cleanup as dc  # noqa: E402  (after the registrations on purpose)

atexit.register(handler("after-import"))
driver = dc.SimulatedDriver()
for name in ("before-import", "finalize-before-import", "after-import"):
    g = driver.create_graph()
    for _ in range(3):
        g.attach(name, lambda n: log("cleaned:" + n))
    graphs[name] = g
