# SPDX-License-Identifier: Apache-2.0
"""Scenario: destructor callbacks that arrive after finalization.

usage: late_callbacks.py N THREADS
The simulated driver holds N destructor calls back; the Py_AtExit backstop
(after the interpreter is gone) releases them from THREADS native threads and
waits for them before counting.  Prints one JSON line: {"created": N}.
"""

import json
import sys

from _held import destroy_held

import deferred_cleanup as dc

n, threads = int(sys.argv[1]), int(sys.argv[2])
# The held calls are due but never delivered before exit: keep the reference's
# exit wait for them short (it reports them as destructors_not_run).
dc.configure(exit_wait_s=0.3)
driver = destroy_held(object() for _ in range(n))
driver._test_release_at_exit(threads)
print(json.dumps({"created": n, "held": driver.held}), flush=True)
