# SPDX-License-Identifier: Apache-2.0
"""Scenario: a cleanup raises KeyboardInterrupt or SystemExit while the
program exits, with destructors still due.

usage: exit_interrupt_at_flush.py N KIND
Holds the destructor calls of a destroyed graph of N payloads; payload 0's
finalizer raises KIND ("ki": KeyboardInterrupt, "exit": SystemExit(3)).  The
last statement releases the calls from a driver thread, so the pending call
is added while the main module ends: on 3.10-3.12 it usually first runs in
CPython's exit-time flush (_Py_FinishPendingCalls, Python/pylifecycle.c), where
no Python frame runs.  Prints {"created": N, "held": ...} and, as its last
line, nothing else.
"""

import json
import sys

import deferred_cleanup as dc

n, kind = int(sys.argv[1]), sys.argv[2]


def fin(i):
    if i == 0:
        raise KeyboardInterrupt if kind == "ki" else SystemExit(3)


driver = dc.SimulatedDriver()
g = driver.create_graph()
for i in range(n):
    g.attach(i, fin)
driver.set_hold(True)
g.destroy()
print(json.dumps({"created": n, "held": driver.held}), flush=True)
driver.release(1)
