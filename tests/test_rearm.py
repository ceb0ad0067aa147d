"""scheduling.hpp, re-arming: one lost pending call does not disable the
pending-call path for good.

CPython 3.10/3.11 lose a call added from a thread with no thread state while
a subinterpreter holds the GIL (probe field ``subinterp.runner``; bpo-10915).
The test hook ``_test_lose_calls(n)`` makes the host report the next n calls
accepted and drop them, on every interpreter.  The reference re-arms a claim
older than ``stale_claim_s`` (a producer on about one fast-path hit in 16, or
a main-thread entry point), with at most two of its calls outstanding; the
comparison variants, as shipped, stay stuck until an unrelated wakeup.
"""
import subprocess
import sys
import textwrap

import pytest

from conftest import wait_until

SCRIPT = textwrap.dedent("""
    import json, sys, time
    import deferred_cleanup as dc
    dc.configure(stale_claim_s=0.2)
    d = dc.SimulatedDriver()
    released = []
    # 1. One payload whose pending call is lost.
    dc._native._test_lose_calls(1)
    g = d.create_graph()
    g.attach(0, released.append)
    g.destroy()
    d.wait_idle(5)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 0.5:      # sleeping: pending calls could run, no entry point
        time.sleep(0.001)
    after_loss = {"released": len(released), "scheduled": dc.counters()["scheduled"]}
    # 2. 100 new payloads from a driver thread, then a sleeping wait only.
    g = d.create_graph()
    for i in range(1, 101):
        g.attach(i, released.append)
    d.set_hold(True)
    g.destroy()
    d.release(1)
    t0 = time.monotonic()
    while len(released) < 101 and time.monotonic() - t0 < 3.0:
        time.sleep(0.001)
    c = dc.counters()
    print(json.dumps({"after_loss": after_loss, "released": len(released), "rearms": c["rearms"],
                      "calls_outstanding": c["calls_outstanding"], "variant": c["variant"],
                      "waited_s": round(time.monotonic() - t0, 3)}))
""")


def _run(variant):
    p = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60,
                       env=dict(__import__("os").environ, DEFERRED_CLEANUP_VARIANT=variant))
    assert p.returncode == 0, p.stderr
    return __import__("json").loads(p.stdout.strip().splitlines()[-1])


def test_reference_recovers_a_lost_call_at_a_later_enqueue():
    r = _run("reference")
    assert r["after_loss"] == {"released": 0, "scheduled": True}, "the call must really have been lost"
    assert r["released"] == 101, f"payloads stayed queued after the lost call: {r}"
    assert r["rearms"] >= 1, r
    assert r["calls_outstanding"] <= 2, r


@pytest.mark.parametrize("variant", ["cuda-core-1.2", "seed"])
def test_comparison_variants_stay_stuck_after_a_lost_call(variant):
    """As shipped: scheduled_ stays set, no producer schedules again."""
    r = _run(variant)
    assert r["after_loss"] == {"released": 0, "scheduled": True}
    assert r["released"] == 0 and r["rearms"] == 0, r


def test_main_thread_entry_point_rearms_a_stale_claim(dc, recorder, lose_call):
    dc.configure(stale_claim_s=0.05)
    try:
        d = dc.SimulatedDriver()
        lose_call(1)
        g = d.create_graph()
        g.attach(1, recorder)
        g.destroy()
        assert d.wait_idle(5)
        assert dc.counters()["scheduled"] is True and recorder.calls == {}
        before = dc.counters()["rearms"]
        import time

        time.sleep(0.1)
        assert dc.poll() == "drained"  # the entry point drains directly ...
        assert recorder.calls == {1: 1}
        assert dc.counters()["rearms"] == before + 1  # ... and restores the pending-call path
        # The re-armed call runs at the next eval-breaker check and clears the claim.
        assert wait_until(lambda: dc.counters()["scheduled"] is False, 5)
        assert dc.counters()["calls_outstanding"] <= 1
    finally:
        dc.configure(stale_claim_s=1.0)
