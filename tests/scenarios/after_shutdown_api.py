"""Scenario: the API after the reference's shutdown hook ran.

usage: after_shutdown_api.py RESULT_PATH
An atexit handler registered *before* importing deferred_cleanup runs after
its hook (atexit is LIFO).  It tries attach(), drain_now() and destroy() and
writes what happened to RESULT_PATH as JSON.
"""
import atexit
import json
import sys

path = sys.argv[1]
keep = {}


def late():
    import deferred_cleanup as dc

    out = {"accepting": dc.counters()["accepting"], "host_alive": dc.counters()["host_alive"]}
    before = sys.getrefcount(keep["obj"])
    try:
        keep["g"].attach(keep["obj"])
        out["attach"] = "ok"
    except dc.ShutdownError:
        out["attach"] = "ShutdownError"
    out["attach_refcount_delta"] = sys.getrefcount(keep["obj"]) - before
    try:
        dc.drain_now()
        out["drain_now"] = "ok"
    except dc.ShutdownError:
        out["drain_now"] = "ShutdownError"
    keep["g2"].destroy()  # its user object dies now: pushed, never cleaned, counted as leaked
    out["destroy"] = "ok"
    with open(path, "w") as f:
        json.dump(out, f)


atexit.register(late)

import deferred_cleanup as dc  # noqa: E402  (after the atexit registration on purpose)

driver = dc.SimulatedDriver()
driver._test_release_at_exit(1)  # keep the driver alive until the backstop waits for it
keep["obj"] = object()
keep["g"] = driver.create_graph()
keep["g2"] = driver.create_graph()
keep["g2"].attach(object())
print(json.dumps({"created": 1}), flush=True)
