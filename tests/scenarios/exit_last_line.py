# SPDX-License-Identifier: Apache-2.0
"""Scenario: graphs destroyed just before the interpreter exits.

usage: exit_last_line.py N MODE
  MODE last-line       the script's last line destroys a graph of N payloads;
  MODE atexit-before   an atexit handler registered BEFORE importing
                       deferred_cleanup destroys it (it runs after the
                       package's own handlers in plain LIFO order);
  MODE finalize-before a weakref.finalize created before the import destroys
                       it at exit (weakref's atexit hook, registered first);
  MODE atexit-after    an atexit handler registered after the import;
  MODE drop-before     an atexit handler registered before the import drops
                       the last reference to the graph (never destroy()):
                       the graph is destroyed by its deallocation.
Each payload's finalizer records the thread it ran on; the result file
(argv[3]) gets {"released": n, "off_main": k} from the last cleanup.  The
Py_AtExit backstop writes the counters (DC_STATS_AT_EXIT).
"""

import atexit
import json
import sys
import threading
import weakref

n, mode, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
state = {"released": 0, "off_main": 0}
holder = {}


class Anchor:
    pass


def destroy():
    holder["graph"].destroy()


def drop():
    holder.clear()  # the last reference: the graph object is deallocated here


if mode == "atexit-before":
    atexit.register(destroy)
elif mode == "drop-before":
    atexit.register(drop)
elif mode == "finalize-before":
    anchor = Anchor()
    weakref.finalize(anchor, destroy)

import deferred_cleanup as dc  # noqa: E402  (after the registrations on purpose)

if mode == "atexit-after":
    atexit.register(destroy)

main = threading.main_thread().ident


def released(obj):
    state["released"] += 1
    if threading.get_ident() != main:
        state["off_main"] += 1
    with open(path, "w") as f:
        json.dump(state, f)


driver = dc.SimulatedDriver()
g = driver.create_graph()
for i in range(n):
    g.attach(i, released)
holder["graph"] = g
print(json.dumps({"created": n}), flush=True)
if mode == "last-line":
    g.destroy()
elif mode == "drop-before":
    del g  # holder["graph"] is now the only reference
