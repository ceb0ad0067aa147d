# SPDX-License-Identifier: Apache-2.0
"""Scenario: an interrupt ends threading._shutdown before the exit sequence's
threading callback runs (3.10-3.13), and destructors are still due.

usage: exit_shutdown_interrupted.py N
Destroys a graph of N payloads whose destructor calls the driver holds back,
then registers, after the import, a threading exit callback
(threading._register_atexit: _shutdown runs the last registered first, with
no try around each) that raises KeyboardInterrupt, as a Ctrl-C landing in
_shutdown would.  A daemon thread, started on the last line (3.12+ refuse
new threads in _shutdown), releases the held calls 1 s later.  CPython
reports the interrupt as unraisable and goes on to the atexit phase
(Python/pylifecycle.c, wait_for_thread_shutdown).  The destructors become due
only after that, so only the exit sequence's wait (exit_wait_s=30) can
release their payloads.  Prints {"created": N, "held": ...} as its last line.
"""

import json
import sys
import threading
import time

from _held import destroy_held

import deferred_cleanup as dc

n = int(sys.argv[1])
dc.configure(exit_wait_s=30)
driver = destroy_held(object() for _ in range(n))


def late_release():
    time.sleep(1.0)
    driver.release(1)  # not an entry point: any thread may call it


def interrupted():
    raise KeyboardInterrupt


threading._register_atexit(interrupted)
print(json.dumps({"created": n, "held": driver.held}), flush=True)
threading.Thread(target=late_release, daemon=True).start()
