# SPDX-License-Identifier: Apache-2.0
"""Scenario: two cleanups raise KeyboardInterrupt and SystemExit(3) at exit,
the first while more destructors are still due.

usage: exit_two_interrupts.py N
Two drivers hold back the destructor calls of their graphs: graph A has one
payload, whose finalizer raises KeyboardInterrupt; graph B has the other
N - 1, and the first of those raises SystemExit(3).  A daemon thread
releases A 0.2 s after the main thread's last line, waits until A's payload
was cleaned (a hang guard of 30 s), then releases B.  In the usual run A's
destructor becomes due during the exit wait (exit_wait_s=30), so the exit
sequence drains A, then B, which became due later: a cleanup's interrupt must
not end the wait.  On a loaded machine A may instead be drained by an
ordinary pending call, before the exit sequence (in the main thread's last
bytecodes, or in threading._shutdown); the test tells the runs apart.
Prints {"created": N, "held": ...} as its last line.
"""

import json
import sys
import threading
import time

from _held import destroy_held

import deferred_cleanup as dc

n = int(sys.argv[1])
dc.configure(exit_wait_s=30)


def fin(i):
    if i == 0:
        raise KeyboardInterrupt
    if i == 1:
        raise SystemExit(3)


a = destroy_held(range(1), fin)
b = destroy_held(range(1, n), fin)


def late_release():
    time.sleep(0.2)
    a.release(1)  # not an entry point: any thread may call it
    deadline = time.monotonic() + 30  # hang guard
    while dc.counters()["cleaned"] < 1 and time.monotonic() < deadline:
        time.sleep(0.001)
    b.release(1)


print(json.dumps({"created": n, "held": a.held + b.held}), flush=True)
threading.Thread(target=late_release, daemon=True).start()
