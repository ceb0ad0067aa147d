# SPDX-License-Identifier: Apache-2.0
"""Scenario: two cleanups raise KeyboardInterrupt and SystemExit(3) inside the
exit sequence, which releases everything and so never stops early.

usage: exit_two_interrupts.py N
Destroys a graph of N payloads whose destructor calls the driver holds back;
a daemon thread releases them 0.2 s after the main thread's last line, so
they become due during the exit wait (exit_wait_s=30) and the exit sequence
drains them.  Payload 0's finalizer raises KeyboardInterrupt, payload 1's
SystemExit(3).  Prints {"created": N, "held": ...} as its last line.
"""

import json
import sys
import threading
import time

import deferred_cleanup as dc

n = int(sys.argv[1])
dc.configure(exit_wait_s=30)


def fin(i):
    if i == 0:
        raise KeyboardInterrupt
    if i == 1:
        raise SystemExit(3)


driver = dc.SimulatedDriver()
g = driver.create_graph()
for i in range(n):
    g.attach(i, fin)
driver.set_hold(True)
g.destroy()


def late_release():
    time.sleep(0.2)
    driver.release(1)  # not an entry point: any thread may call it


print(json.dumps({"created": n, "held": driver.held}), flush=True)
threading.Thread(target=late_release, daemon=True).start()
