# SPDX-License-Identifier: Apache-2.0
"""Scenario: the main thread is busy in pure Python while destructor
callbacks arrive (gh-95820).

usage: starvation.py MODE N BUSY_S ENTRY_MS
  MODE busy   spin in pure Python for BUSY_S seconds, calling no entry point;
  MODE entry  spin the same way but call deferred_cleanup.stats() (an entry
              point) every ENTRY_MS milliseconds.
Then sleep (dropping the GIL) until everything is cleaned.  Prints one JSON
line with: cleaned_in_busy (bool), delay_ms (float, release -> last cleanup,
or null), delivered_in_busy (int), cleaned_after_sleep (bool), and counter
deltas.
"""

import json
import sys
import time

import deferred_cleanup as dc

mode, n, busy_s, entry_ms = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
driver = dc.SimulatedDriver()
g = driver.create_graph()
for i in range(n):
    g.attach(i)
driver.set_hold(True)
g.destroy()
dc.drain_now()
before = dc.counters()
driver.release(4)
t0 = time.perf_counter()
last_entry = t0
cleaned_in_busy = False
while time.perf_counter() - t0 < busy_s:  # pure Python: never drops the GIL
    if dc.counters()["cleaned"] - before["cleaned"] >= n:
        cleaned_in_busy = True
        break
    if mode == "entry" and (time.perf_counter() - last_entry) * 1000.0 >= entry_ms:
        dc.stats()
        last_entry = time.perf_counter()
delivered_in_busy = driver.delivered
delay_ms = (
    (dc._native.last_cleanup_ns() - driver.last_release_ns) / 1e6 if cleaned_in_busy else None
)
deadline = time.monotonic() + 10.0
while dc.counters()["cleaned"] - before["cleaned"] < n and time.monotonic() < deadline:
    time.sleep(0.001)
after = dc.counters()
driver.wait_idle(10.0)
print(
    json.dumps(
        {
            "mode": mode,
            "variant": dc.variant(),
            "cleaned_in_busy": cleaned_in_busy,
            "delay_ms": delay_ms,
            "delivered_in_busy": delivered_in_busy,
            "cleaned_after_sleep": after["cleaned"] - before["cleaned"] == n,
            "direct_drains": after["direct_drains"] - before["direct_drains"],
            "pending_calls": after["pending_calls"] - before["pending_calls"],
            "drain_cycles": after["drain_cycles"] - before["drain_cycles"],
        }
    ),
    flush=True,
)
