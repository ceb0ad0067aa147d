# SPDX-License-Identifier: Apache-2.0
"""Scenario: a driver thread is held inside the gate window (between its
`accepting_` check and Py_AddPendingCall) while the interpreter exits.

usage: held_in_gate.py HOLD
  HOLD an integer: the thread is held that many milliseconds (the reference's
       atexit hook must wait it out);
  HOLD until-release: held until the Py_AtExit backstop releases it, i.e. after
       finalization (the seed's window).
Prints one JSON line: {"held": bool, "created": 1}.
"""

import json
import sys

import deferred_cleanup as dc

hold = sys.argv[1]
dc._native._test_arm_gate_hold(None if hold == "until-release" else int(hold))
driver = dc.SimulatedDriver()
driver._test_release_at_exit(1)  # keep the driver (and its held thread) alive until the backstop
g = driver.create_graph()
g.attach(object())
g.destroy()
held = dc._native._test_wait_gate_held(10.0)
print(json.dumps({"held": held, "created": 1}), flush=True)
