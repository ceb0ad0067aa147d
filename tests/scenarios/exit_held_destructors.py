# SPDX-License-Identifier: Apache-2.0
"""Scenario: destructors that do not run before exit (the driver holds them),
and a graph still alive at exit.

usage: exit_held_destructors.py N EXIT_WAIT_S
Destroys a graph of N payloads whose destructor calls the driver holds back
(never released before the backstop), and keeps a second graph of N
payloads alive.  The exit sequence must wait EXIT_WAIT_S seconds at most and
report both; prints {"created": 2N} and, as its last line, nothing else.
"""

import json
import sys

import deferred_cleanup as dc

n, wait_s = int(sys.argv[1]), float(sys.argv[2])
dc.configure(exit_wait_s=wait_s)
driver = dc.SimulatedDriver()
held = driver.create_graph()
alive = driver.create_graph()
for _ in range(n):
    held.attach(object())
    alive.attach(object())
driver.set_hold(True)
held.destroy()
print(json.dumps({"created": 2 * n, "held": driver.held}), flush=True)
