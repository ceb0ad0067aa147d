# SPDX-License-Identifier: Apache-2.0
"""Scenario: os.fork() in the states that used to break the child.

usage: fork_child.py MODE RESULT
  main                fork on the main thread while the simulated driver has
                      threads (the child exits normally);
  in-cleanup          a payload's finalizer forks in the middle of a drain on
                      the main thread (the child finishes that drain);
  worker-during-drain a worker thread forks while the main thread is inside a
                      drain (the drain does not exist in the child);
  worker              a worker thread forks (the child's main thread is that
                      worker's copy);
  gate                the main thread forks while a producer is held inside
                      the gate window (the child exits normally).
In the child: 20 new payloads are attached to a new graph, destroyed, and
waited for in a sleeping loop, with no entry point for the first second and
with poll() (an entry point) after it, for at most 5 s more; drain_now() is
called; RESULT gets {"released", "on_child_main", "drain_now",
"in_flight" (once the drivers are idle), "scheduled_before", "stuck", "drain_cycles",
"released_by_pending_call", "calls_accepted", "adds_cut_by_fork",
"driver_idle", "lost_in_fork"} (released in
the first second, with no entry point: only a pending call can have done it;
calls_accepted: Py_AddPendingCall calls that returned 0 in the child, to
compare with drain_cycles; adds_cut_by_fork: producers that were between
counting a scheduling attempt and its result (a window that holds
Py_AddPendingCall) when the parent forked; driver_idle: the parent's driver
went idle in the child within 5 s; lost_in_fork: its destructor calls that
were running on a thread the child does not have).  The parent prints
{"child_rc", "child_s"}.
"""

import json
import os
import sys
import threading
import time

import deferred_cleanup as dc

mode, path = sys.argv[1], sys.argv[2]
FREE_THREADED = bool(__import__("sysconfig").get_config_var("Py_GIL_DISABLED"))
parent = os.getpid()


def child_work():
    before = dc.counters()
    # Forked by a worker while the main thread ran our pending call: CPython
    # may never run a pending call here (counted; docs Caveats, fork()).
    stuck = before["forks_in_pending_call"] > 0
    # Forked by a worker on a free-threaded build: CPython signals pending calls
    # to _PyRuntime.main_tstate, which stays the parent's main thread state
    # (set once at start-up, Python/pylifecycle.c), and no GIL hand-over
    # recomputes this thread's eval breaker, so no pending call runs here
    # either (docs Caveats, fork()).
    stuck = stuck or (FREE_THREADED and mode in ("worker", "worker-during-drain"))
    rec = []
    d = dc.SimulatedDriver()
    g = d.create_graph()
    me = threading.get_ident()
    for i in range(20):
        g.attach(i, lambda o: rec.append(threading.get_ident()))
    g.destroy()
    # First 1 s with no entry point: only a pending call can release them.
    deadline = time.monotonic() + 1
    while len(rec) < 20 and time.monotonic() < deadline:
        time.sleep(0.001)
    by_pending_call = len(rec)
    # No pending call in the first second: in the stuck states above, and
    # when CPython lost the child's accepted call (a fork that cut another
    # thread's Py_AddPendingCall, 3.13+; docs Caveats, fork()).  A
    # main-thread entry point is the documented recovery: it drains at once.
    deadline = time.monotonic() + 5
    while len(rec) < 20 and time.monotonic() < deadline:
        time.sleep(0.001)
        dc.poll()
    try:
        dc.drain_now()
        dn = "ok"
    except dc.NotMainThreadError:
        dn = "NotMainThreadError"
    # The parent's driver restarted its worker in the child, which delivers
    # what was still due at the fork: a producer of the child's own may be
    # inside the gate at any moment until it is idle.  An inherited producer
    # would stay counted for good; so the gate is read once everything is idle.
    idle = driver.wait_idle(5)
    after = dc.counters()
    out = {
        "released": len(rec),
        "on_child_main": all(t == me for t in rec),
        "drain_now": dn,
        "in_flight": after["in_flight"],
        "scheduled_before": before["scheduled"],
        "stuck": stuck,
        "drain_cycles": after["drain_cycles"] - before["drain_cycles"],
        "released_by_pending_call": by_pending_call,
        "calls_accepted": after["pending_calls"] - before["pending_calls"],
        "adds_cut_by_fork": before["schedule_attempts"]
        - before["schedule_failures"]
        - before["pending_calls"],
        "driver_idle": idle,
        "lost_in_fork": driver.lost_in_fork,
    }
    with open(path, "w") as f:
        json.dump(out, f)


def wait_child(pid, start):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), time.monotonic() - start
        time.sleep(0.005)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return "hung", time.monotonic() - start


driver = dc.SimulatedDriver()
g0 = driver.create_graph()
pids = []

if mode == "main":
    for _ in range(50):
        g0.attach(object())
    g0.destroy()  # the driver's worker is delivering while we fork
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        child_work()
        sys.exit(0)
    pids.append((pid, start))
elif mode == "in-cleanup":
    state = {"forked": False}

    def fin(i):
        if i == 2 and not state["forked"]:
            state["forked"] = True
            state["start"] = time.monotonic()
            state["pid"] = os.fork()

    for i in range(5):
        g0.attach(i, fin)
    driver.set_hold(True)
    g0.destroy()
    driver.release(1)
    driver.wait_idle(5)
    dc.drain_now()
    if os.getpid() != parent:
        child_work()
        sys.exit(0)
    pids.append((state["pid"], state["start"]))
elif mode in ("worker-during-drain", "worker"):
    go = threading.Event()
    box = {}

    def forker():
        box["start"] = time.monotonic()
        pid = os.fork()
        if pid == 0:
            child_work()
            os._exit(0)
        box["pid"] = pid
        go.set()

    if mode == "worker":
        t = threading.Thread(target=forker)
        t.start()
        t.join()
    else:

        def fin(i):
            if i == 0:
                threading.Thread(target=forker).start()
                go.wait(10)

        g0.attach(0, fin)
        driver.set_hold(True)
        g0.destroy()
        driver.release(1)
        driver.wait_idle(5)
        dc.drain_now()
    pids.append((box["pid"], box["start"]))
elif mode == "gate":
    dc._native._test_arm_gate_hold(None)
    g0.attach(object())
    g0.destroy()
    assert dc._native._test_wait_gate_held(10.0)
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        child_work()
        sys.exit(0)
    pids.append((pid, start))
else:
    raise SystemExit(f"unknown mode {mode}")

rc, secs = wait_child(*pids[0])
if mode == "gate":
    dc._native._test_release_gate()
print(json.dumps({"child_rc": rc, "child_s": round(secs, 3)}), flush=True)
