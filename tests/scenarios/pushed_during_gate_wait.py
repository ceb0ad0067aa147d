# SPDX-License-Identifier: Apache-2.0
"""Scenario: a producer pushes while the exit sequence waits out the gate.

usage: pushed_during_gate_wait.py
A destructor of graph A is held inside the gate window (it pushed its item,
entered the gate and claimed); the exit wait is 0 s, so the exit sequence
does not wait for it in its step 0 but closes the gate and waits it out.
While held, that producer waits until the gate is closed, then releases the
destructor of graph B (another driver): B's item is pushed after the close,
gets no pending call (the gate is closed), and only a drain after the gate
wait can release it.  Each finalizer prints one line saying whether it ran
on the main thread.  Prints, before exit, {"held": bool, "created": 2}.
"""

import json
import threading

import deferred_cleanup as dc


def finalizer(name):
    def release(obj):
        main = threading.current_thread() is threading.main_thread()
        print(f"released {name} main={main}", flush=True)

    return release


dc.configure(exit_wait_s=0)
late = dc.SimulatedDriver()
late.set_hold(True)
gb = late.create_graph()
gb.attach(object(), finalizer("B"))
gb.destroy()  # held by the driver until the gate is closed

driver = dc.SimulatedDriver()
dc._native._test_arm_gate_hold(0, late)
ga = driver.create_graph()
ga.attach(object(), finalizer("A"))
ga.destroy()
held = dc._native._test_wait_gate_held(10.0)
print(json.dumps({"held": held, "created": 2}), flush=True)
