# SPDX-License-Identifier: Apache-2.0
"""The four variants, each faithful to its source (policy.hpp).

Every variant imports, releases a burst of payloads exactly once on the main
thread, and reports its name.  Where they differ on purpose, the difference
is asserted: at an API entry point inside a pure-Python busy loop, the
reference drains directly, while the comparison variants only retry
scheduling, which does nothing while the starved pending call keeps
``scheduled_`` set (gh-95820 on CPython 3.10-3.12; cpython_facts field
``delay.busy_python``).
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from deferred_cleanup import cpython_facts

VARIANTS = ["reference", "seed", "cuda-core-1.2", "cuda-core-1.2-fixed"]

BURST = textwrap.dedent("""
    import json, threading, time
    import deferred_cleanup as dc
    main = threading.get_ident()
    seen = {}
    def fin(i):
        seen[i] = seen.get(i, 0) + 1
        assert threading.get_ident() == main
    d = dc.SimulatedDriver()
    g = d.create_graph()
    for i in range(1000):
        g.attach(i, fin)
    d.set_hold(True)
    g.destroy()
    d.release(8)
    t0 = time.monotonic()
    while len(seen) < 1000 and time.monotonic() - t0 < 20:
        time.sleep(0.001)
    print(json.dumps({"variant": dc.variant(), "released": len(seen),
                      "once": set(seen.values()) == {1},
                      "pending_calls": dc.counters()["pending_calls"]}))
""")

BUSY = textwrap.dedent("""
    import json, time
    import deferred_cleanup as dc
    seen = []
    d = dc.SimulatedDriver()
    g = d.create_graph()
    for i in range(32):
        g.attach(i, seen.append)
    d.set_hold(True)
    g.destroy()
    released = False
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1.0:   # pure Python, one API entry point per iteration
        if not released:                 # the destructors run while the main thread spins
            d.release(8)
            released = True
        dc.poll()
    during = len(seen)
    time.sleep(0.05)
    print(json.dumps({"during": during, "after": len(seen)}))
""")


def _run(code, variant):
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, DEFERRED_CLEANUP_VARIANT=variant),
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_releases_a_burst_once_on_the_main_thread(variant):
    r = _run(BURST, variant)
    assert r["variant"] == variant
    assert r["released"] == 1000 and r["once"] is True, r
    assert r["pending_calls"] >= 1, r


@pytest.mark.parametrize("variant", VARIANTS)
def test_entry_points_inside_a_busy_loop(variant):
    r = _run(BUSY, variant)
    starved = cpython_facts.assumed("delay.busy_python")[0] == "starved"
    if variant == "reference" or not starved:
        assert r["during"] == 32, r
    else:
        # The comparison variants' entry points only call schedule().  Once a
        # destructor thread holds the claim, its call starves (gh-95820) and
        # nothing more is released during the loop; a poll() that wins the
        # claim first adds the call from the main thread, which does run, so
        # how many are released before a foreign claim sticks is a race (0 on
        # this 2-core machine, 11 of 32 on a 16-core host: notes/gpu-run.md).
        assert r["during"] < 32, (
            f"{variant} retries only schedule(): the starving call holds the rest: {r}"
        )
    assert r["after"] == 32, r
