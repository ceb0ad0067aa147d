# SPDX-License-Identifier: Apache-2.0
"""Scenario: the API after the reference's exit sequence ran.

usage: after_shutdown_api.py RESULT_PATH
The exit sequence runs after every Python atexit handler.  Code that runs
later still can only be a finalizer during interpreter finalization: here
the __del__ of an object that lives until its module is torn down.  It tries
attach(), drain_now() and destroy() and writes what happened to RESULT_PATH
as JSON.
"""

import json
import sys

import deferred_cleanup as dc

path = sys.argv[1]


class Late:
    """Calls the API from __del__, during finalization (after the exit hook)."""

    def __init__(self):
        self.dc = dc
        self.json = json
        self.sys = sys
        self.open = open  # builtins may be gone by the time __del__ runs
        self.driver = dc.SimulatedDriver()
        self.driver._test_release_at_exit(
            1
        )  # keep the driver alive until the backstop waits for it
        self.obj = object()
        self.g = self.driver.create_graph()
        self.g2 = self.driver.create_graph()
        self.g2.attach(object())

    def __del__(self):
        dc, out = self.dc, {}
        c = dc.counters()
        out["accepting"], out["host_alive"] = c["accepting"], c["host_alive"]
        before = self.sys.getrefcount(self.obj)
        try:
            self.g.attach(self.obj)
            out["attach"] = "ok"
        except dc.ShutdownError:
            out["attach"] = "ShutdownError"
        out["attach_refcount_delta"] = self.sys.getrefcount(self.obj) - before
        try:
            dc.drain_now()
            out["drain_now"] = "ok"
        except dc.ShutdownError:
            out["drain_now"] = "ShutdownError"
        self.g2.destroy()  # its user object dies now: pushed, never cleaned, counted as leaked
        out["destroy"] = "ok"
        with self.open(path, "w") as f:
            self.json.dump(out, f)


late = Late()
print(json.dumps({"created": 1}), flush=True)
