# SPDX-License-Identifier: Apache-2.0
"""Scenario: a cleanup raises KeyboardInterrupt or SystemExit while the
program exits, with destructors still due, and the host's pending call is
first run by CPython's exit-time flush.

usage: exit_interrupt_at_flush.py N KIND
Holds the destructor calls of a destroyed graph of N payloads; payload 0's
finalizer raises KIND ("ki": KeyboardInterrupt, "exit": SystemExit(3)).  The
test hook _test_release_at_exit_flush (reference/testing/test_hooks.cpp)
wraps threading._shutdown: Py_FinalizeEx calls it and then, with no Python
frame run in between, _Py_FinishPendingCalls (Python/pylifecycle.c,
v3.10.0 to v3.14.0); the wrapper releases the held calls and waits for them
with the GIL held, so the host's pending call, added by the driver's thread,
reaches the flush in every run (the construction, not a timing).  Prints
{"created": N, "held": ...} as its last line.
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
dc._native._test_release_at_exit_flush(driver)
print(json.dumps({"created": n, "held": driver.held}), flush=True)
