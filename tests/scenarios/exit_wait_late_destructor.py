# SPDX-License-Identifier: Apache-2.0
"""Scenario: a destructor that becomes due about DELAY_S seconds after exit starts.

usage: exit_wait_late_destructor.py N EXIT_WAIT_S DELAY_S
Calls configure(exit_wait_s=EXIT_WAIT_S), destroys a graph of N payloads
whose destructor calls the driver holds back, and starts a daemon thread
that releases them DELAY_S seconds after the main thread's last line (the
exit sequence then runs; a daemon thread is not joined).  Prints, as its last
line, {"created": N, "held": ..., "settings": settings()}.
"""

import json
import sys
import threading
import time

from _held import destroy_held

import deferred_cleanup as dc

n, wait_s, delay_s = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
dc.configure(exit_wait_s=wait_s)
driver = destroy_held(object() for _ in range(n))


def late_release():
    time.sleep(delay_s)
    driver.release(1)  # not an entry point: any thread may call it


print(json.dumps({"created": n, "held": driver.held, "settings": dc.settings()}), flush=True)
threading.Thread(target=late_release, daemon=True).start()
