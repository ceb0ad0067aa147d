"""Scenario: a daemon thread blocked in a GIL-releasing API call while the
main thread exits (CPython ends such a thread when it re-takes the GIL during
finalization: pthread_exit on 3.10-3.13, a hang from 3.14).

usage: daemon_wait_idle.py
Exits 0 unless the process aborts.
"""

import threading
import time

import deferred_cleanup as dc

driver = dc.SimulatedDriver()
started = threading.Event()


def loop():
    started.set()
    while True:
        driver.wait_idle(0.01)


threading.Thread(target=loop, daemon=True).start()
started.wait(5)
time.sleep(0.02)
