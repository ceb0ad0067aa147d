# SPDX-License-Identifier: Apache-2.0
"""Scenario: paused simulated drivers whose destructor calls are still due at
exit.

usage: exit_backstop_drivers.py DRIVERS EXIT_WAIT_S BACKSTOP_WAIT_S
Makes DRIVERS drivers, each paused (set_paused) with the destructor calls of
one destroyed graph of 10 payloads due (never run), then exits with
configure(exit_wait_s=EXIT_WAIT_S, backstop_wait_s=BACKSTOP_WAIT_S).  With
DRIVERS = 0 it only configures (the baseline).  Prints {"due": N} (the
destructors due) as its last line.
"""

import ctypes
import json
import sys

import deferred_cleanup as dc

k, exit_wait_s, backstop_wait_s = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
dc.configure(exit_wait_s=exit_wait_s, backstop_wait_s=backstop_wait_s)
drivers = []
for _ in range(k):
    d = dc.SimulatedDriver()
    g = d.create_graph()
    for i in range(10):
        g.attach(i)
    d.set_paused(True)
    g.destroy()
    # Alive until the backstop, as a driver some other owner keeps (dropping
    # it would unpause it): one reference leaked on purpose.
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(d))
    drivers.append(d)
print(json.dumps({"due": dc.counters()["destructors_due"]}), flush=True)
