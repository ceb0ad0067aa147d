# SPDX-License-Identifier: Apache-2.0
"""Scenario: payloads in flight while the interpreter exits.

usage: exit_in_flight.py N THREADS MODE
  MODE burst           release a burst of N destructor calls from THREADS native
                       threads and return from the script at once;
  MODE atexit-destroy  destroy the graphs from an atexit handler registered
                       after the import (so it runs before deferred_cleanup's)
                       and wait until the driver delivered every destructor
                       call: everything is queued before the final drain.
Prints one JSON line: {"created": N}.  The Py_AtExit backstop writes the final
counters to $DC_STATS_AT_EXIT.
"""

import atexit
import json
import sys

import deferred_cleanup as dc

n, threads, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
driver = dc.SimulatedDriver()
driver._test_release_at_exit(threads)  # keep the driver alive until the backstop waits for it
graphs = []
for i in range(n):
    g = driver.create_graph()
    g.attach([i])
    graphs.append(g)

if mode == "burst":
    driver.set_hold(True)
    for g in graphs:
        g.destroy()
    driver.release(threads)
elif mode == "atexit-destroy":

    def destroy_all():
        for g in graphs:
            g.destroy()
        driver.wait_idle(10.0)

    atexit.register(destroy_all)
else:
    raise SystemExit(f"unknown mode {mode}")
print(json.dumps({"created": n}), flush=True)
