# SPDX-License-Identifier: Apache-2.0
"""scheduling.hpp, re-arming: lost pending calls do not disable the
pending-call path for good.

CPython 3.10/3.11 lose a call added from a thread with no thread state while
a subinterpreter holds the GIL (probe field ``subinterp.runner``; bpo-10915).
The test hook ``_test_lose_calls(n)`` makes the host report the next n calls
accepted and drop them, on every interpreter.  The reference re-arms a claim
seen outstanding for ``stale_claim_s`` (its clock starts at the first look
after the call was added, not at the add; a look is a producer's sampled
fast-path hit, one in 2^rearm_sample_log2 (policy.hpp), or an entry point)
with at most two of its calls outstanding; when
two calls in a row are lost, a main-thread entry point adds one more past
that bound (at most three).  The comparison variants, as shipped, stay stuck
until an unrelated wakeup.
"""

import subprocess
import sys
import textwrap

import pytest
from conftest import LOAD, wait_until

# Every test here uses a `_test_` hook (lose a call, fill the ring): test builds only.
pytestmark = pytest.mark.test_hooks

SCRIPT = textwrap.dedent("""
    import json, sys, time
    import deferred_cleanup as dc
    F = float(sys.argv[1])  # the load factor (conftest.LOAD): every time below scales with it
    STALE_S = round(0.2 * F, 3)
    dc.configure(stale_claim_s=STALE_S)
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
    # 2. 100 new payloads (or more) from a driver thread, then a sleeping wait only.
    g = d.create_graph()
    for i in range(1, 101):
        g.attach(i, released.append)
    # The fast path looks at the claim's age only for items its address hash
    # picks (the reference policy's sampling, callback.hpp), and a burst of 100
    # can hold none (often enough at that rate: docs/design/callback.rst).
    # Attach until the burst holds one the producer will sample; 4000 is a
    # hang guard, not a tuning: a burst that long holds none with probability
    # (1 - 2^-rearm_sample_log2)^4000, negligible at the reference's rate.
    n = 100
    while dc._native._test_stale_sampled(g) == 0 and n < 4000:  # a hang guard
        n += 1
        g.attach(n, released.append)
    sampled = dc._native._test_stale_sampled(g)
    # The entry points above (create_graph, attach, destroy) are the first
    # look at the claim: its stale clock starts there, not at the add, so the
    # destructors come once the claim has been seen outstanding for the bound.
    d.set_hold(True)
    g.destroy()
    time.sleep(STALE_S + 0.1 * F)
    # Witness: no entry point above re-armed (had the attach loop outlasted the
    # bound, one would have, and the producer's re-arm would go untested).
    rearms_before_release = dc.counters()["rearms"]
    d.release(1)
    t0 = time.monotonic()
    while len(released) < 1 + n and time.monotonic() - t0 < 3.0 * F:  # a hang guard
        time.sleep(0.001)
    c = dc.counters()
    print(json.dumps({"after_loss": after_loss, "released": len(released), "payloads": 1 + n,
                      "sampled": sampled, "rearms": c["rearms"],
                      "rearms_before_release": rearms_before_release,
                      "calls_outstanding": c["calls_outstanding"], "variant": c["variant"],
                      "waited_s": round(time.monotonic() - t0, 3)}))
""")


def _run(variant):
    p = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(LOAD)],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(__import__("os").environ, DEFERRED_CLEANUP_VARIANT=variant),
    )
    assert p.returncode == 0, p.stderr
    return __import__("json").loads(p.stdout.strip().splitlines()[-1])


def test_reference_recovers_a_lost_call_at_a_later_enqueue():
    r = _run("reference")
    assert r["after_loss"] == {"released": 0, "scheduled": True}, (
        "the call must really have been lost"
    )
    assert r["sampled"] >= 1, (
        f"no payload of the burst is sampled, even after attaching up to the hang guard's 4000: {r}"
    )
    assert r["rearms_before_release"] == 0, (
        f"witness: an entry point re-armed before the destructors came: {r}"
    )
    assert r["released"] == r["payloads"], f"payloads stayed queued after the lost call: {r}"
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

        # Twice the bound after the add, but nobody has looked at the claim:
        # the first look (this entry point) drains directly and only starts
        # the claim's stale clock (rearm.hpp: stale once SEEN outstanding for
        # the bound), so it does not re-arm.
        time.sleep(0.1)
        assert dc.poll() == "drained"  # the entry point drains directly ...
        assert recorder.calls == {1: 1}
        assert dc.counters()["rearms"] == before, "stale from the add: the first look re-armed"
        assert dc.counters()["scheduled"] is True
        # The bound after that first look: the next entry point re-arms.
        time.sleep(0.1)
        assert dc.poll() == "nothing"  # the queue is empty ...
        assert dc.counters()["rearms"] == before + 1  # ... and it restores the pending-call path
        # The re-armed call runs at the next eval-breaker check and clears the claim.
        assert wait_until(lambda: dc.counters()["scheduled"] is False, 5)
        assert dc.counters()["calls_outstanding"] <= 1
    finally:
        dc.configure(stale_claim_s=1.0)


# Two consecutive lost calls: the claim's call (from the driver thread) and
# the re-arm's call (a sampled producer on the driver thread, once the claim
# is stale).  Producers may add no third call (the bound), so the path stays
# off while the main thread sleeps; one main-thread entry point then drains
# directly and adds one call past the bound (scheduling.hpp, re-arming,
# rule 2), which runs and clears the claim; later payloads are released by
# a pending call again.  Every graph is made before the first loss, because
# attach() and destroy() are entry points too.
TWO_LOST = textwrap.dedent("""
    import json, threading, time
    import deferred_cleanup as dc
    dc.configure(stale_claim_s=0.2)
    d = dc.SimulatedDriver()
    released = []
    def fin(v):
        released.append((v, threading.get_ident()))
    graphs = {}
    for name, n in (("a", 1), ("b", 200), ("d", 50)):
        g = graphs[name] = d.create_graph()
        for i in range(n):
            g.attach((name, i), fin)
    # "b"'s destructors must re-arm: the fast path looks at the claim's age
    # only for items its address hash picks (the reference policy's sampling,
    # callback.hpp), and a burst can hold none (docs/design/callback.rst).
    # Attach until it holds one; 4000 is a hang guard, not a tuning.
    n_b = 200
    while dc._native._test_stale_sampled(graphs["b"]) == 0 and n_b < 4000:  # a hang guard
        graphs["b"].attach(("b", n_b), fin)
        n_b += 1
    total = 1 + n_b + 50
    def sleep_until(pred, bound_s):
        t0 = time.monotonic()
        while not pred() and time.monotonic() - t0 < bound_s:
            time.sleep(0.001)                  # sleeping: pending calls may run, no entry point
        return round(time.monotonic() - t0, 3)
    def snap():
        c = dc.counters()
        keys = ("pending_calls", "drain_cycles", "direct_drains", "rearms", "main_rearms",
                "calls_outstanding", "scheduled")
        return dict({k: c[k] for k in keys}, released=len(released))
    out = {"start": snap(), "b": n_b, "sampled": dc._native._test_stale_sampled(graphs["b"])}
    dc._native._test_lose_calls(2)
    # 1. The claim's call, lost.
    graphs["a"].destroy()
    assert d.wait_idle(5)
    # 2. Held destructors, released from a driver thread once the claim is stale:
    #    a sampled producer re-arms, and that call is lost too.
    d.set_hold(True)
    graphs["b"].destroy()
    time.sleep(0.3)
    d.release(1)
    assert d.wait_idle(5)
    out["after_two_losses"] = snap()
    time.sleep(0.5)
    out["after_sleep"] = snap()
    # 3. One main-thread entry point.
    out["poll"] = dc.poll()
    out["after_entry"] = snap()
    out["claim_cleared_s"] = sleep_until(lambda: not dc.counters()["scheduled"], 5.0)
    out["after_main_call"] = snap()
    # 4. New payloads, from the driver thread: released by a pending call.
    d.set_hold(False)
    graphs["d"].destroy()
    out["waited_s"] = sleep_until(lambda: len(released) == total, 5.0)
    out["end"] = snap()
    main = threading.main_thread().ident
    out["off_main"] = sum(1 for _, t in released if t != main)
    out["variant"] = dc.counters()["variant"]
    print(json.dumps(out))
""")


def test_two_lost_calls_then_one_main_thread_entry_point_restore_the_pending_call_path():
    p = subprocess.run(
        [sys.executable, "-c", TWO_LOST],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(__import__("os").environ, DEFERRED_CLEANUP_VARIANT="reference"),
    )
    assert p.returncode == 0, p.stderr
    r = __import__("json").loads(p.stdout.strip().splitlines()[-1])
    s = r["start"]
    lost = r["after_two_losses"]
    # A destructor of "b" looks at the claim's age (b stops growing at the
    # hang guard's 4000 only if none is sampled).
    assert r["sampled"] >= 1 and r["b"] >= 200, r
    # Two calls accepted (the claim's and the re-arm's), neither ran: both lost.
    assert lost["pending_calls"] - s["pending_calls"] == 2, r
    assert lost["rearms"] - s["rearms"] == 1, r
    assert lost["drain_cycles"] == s["drain_cycles"], r
    # Only the first payload was released, directly, by destroy()'s entry point (before the bound).
    assert lost["released"] == 1 and lost["direct_drains"] - s["direct_drains"] == 1, r
    assert lost["scheduled"] is True and lost["calls_outstanding"] == 2, r
    # Half a second of sleep (pending calls could run, none is queued): still nothing.
    assert r["after_sleep"] == lost, f"the path was not off after two lost calls: {r}"
    # One entry point drains directly and adds one call past the bound ...
    e = r["after_entry"]
    assert r["poll"] == "drained" and e["released"] == 1 + r["b"], r
    assert e["direct_drains"] - lost["direct_drains"] == 1, r
    assert e["rearms"] - lost["rearms"] == 1, r
    assert (
        e["main_rearms"] - lost["main_rearms"] == 1 and lost["main_rearms"] == s["main_rearms"]
    ), r
    assert e["pending_calls"] - lost["pending_calls"] == 1, r
    # ... which runs at the next eval-breaker check and clears the claim.
    m = r["after_main_call"]
    # claim_cleared_s stops at 5 s: a hang guard; the rule is that the claim
    # was cleared (scheduled False) with one drain cycle, checked next.
    assert r["claim_cleared_s"] < 5.0 and m["scheduled"] is False, (
        f"hang guard (5 s): the main thread's call never ran: {r}"
    )
    assert m["drain_cycles"] - s["drain_cycles"] == 1 and m["calls_outstanding"] == 0, r
    # 50 new payloads: released by a pending call, on the main thread, with no entry point.
    end = r["end"]
    assert end["released"] == 1 + r["b"] + 50, f"payloads stayed queued after the recovery: {r}"
    assert r["waited_s"] < 5.0, f"hang guard (5 s): the 50 payloads were not released: {r}"
    assert end["direct_drains"] == e["direct_drains"], (
        f"released by an entry point, not a pending call: {r}"
    )
    assert end["drain_cycles"] - m["drain_cycles"] >= 1, r
    assert end["pending_calls"] - m["pending_calls"] >= 1, r
    assert end["rearms"] == e["rearms"], r
    assert r["off_main"] == 0, r
    print(
        f"two lost calls: main thread's call cleared the claim after {r['claim_cleared_s']} s; "
        f"50 payloads released by {end['drain_cycles'] - m['drain_cycles']} pending call(s) in "
        f"{r['waited_s']} s"
    )
