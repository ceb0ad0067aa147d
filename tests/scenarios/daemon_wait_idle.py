# SPDX-License-Identifier: Apache-2.0
"""Scenario: a daemon thread blocked in a GIL-releasing API call while the
main thread exits (CPython ends such a thread when it re-takes the GIL during
finalization: pthread_exit on 3.10-3.13, a hang from 3.14).

usage: daemon_wait_idle.py [idle|paused]
  idle    (default) the daemon loops on wait_idle(0.01) of an idle driver:
          it is mostly in Python or waiting for the GIL;
  paused  the driver's thread is paused with one destructor call due, so
          wait_idle(0.001) never finds it idle and the daemon is almost
          always inside the call when finalization begins (exit_wait_s is
          0.05, so the exit sequence does not wait long for that call).
Exits 0 unless the process aborts; the Py_AtExit backstop's counters
(DC_STATS_AT_EXIT) say how many threads parked (daemon_parks).
"""

import sys
import threading
import time

import deferred_cleanup as dc

mode = sys.argv[1] if len(sys.argv) > 1 else "idle"
driver = dc.SimulatedDriver()
timeout_s = 0.01
if mode == "paused":
    dc.configure(exit_wait_s=0.05)
    driver.set_paused(True)
    g = driver.create_graph()
    g.attach(object())
    g.destroy()
    timeout_s = 0.001
elif mode != "idle":
    raise SystemExit(f"unknown mode {mode}")
started = threading.Event()


def loop():
    started.set()
    while True:
        driver.wait_idle(timeout_s)


threading.Thread(target=loop, daemon=True).start()
started.wait(5)
time.sleep(0.02)
