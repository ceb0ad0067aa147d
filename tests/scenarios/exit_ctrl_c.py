# SPDX-License-Identifier: Apache-2.0
"""Scenario: Ctrl-C while the exit sequence waits for due destructors.

usage: exit_ctrl_c.py N EXIT_WAIT_S
Destroys a graph of N payloads whose destructor calls the driver holds back
(due for the whole exit wait of EXIT_WAIT_S seconds); a daemon thread, alive
in the atexit phase, sends SIGINT to the process 1 s after the main module
ends.  Prints {"created": N, "held": N} as its last stdout line.
"""

import json
import os
import signal
import sys
import threading
import time

from _held import destroy_held

import deferred_cleanup as dc

n, wait_s = int(sys.argv[1]), float(sys.argv[2])
# A process started with SIGINT ignored (a background job of a
# non-interactive shell, as CI may be) passes that on, and CPython then
# installs no KeyboardInterrupt handler: set it here.
signal.signal(signal.SIGINT, signal.default_int_handler)
dc.configure(exit_wait_s=wait_s, backstop_wait_s=0.5)
driver = destroy_held(object() for _ in range(n))


def ctrl_c() -> None:
    time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGINT)


threading.Thread(target=ctrl_c, daemon=True).start()
print(json.dumps({"created": n, "held": driver.held}), flush=True)
