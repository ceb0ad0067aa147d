# SPDX-License-Identifier: Apache-2.0
"""scheduling.hpp: at most one outstanding pending call; refusals retried.

The capacity of CPython's pending-call ring comes from cpython_facts
(Python/ceval_gil.c; measured by the probe).  Source: cuda-python PR #2371;
docs/design/scheduling.rst.
"""

import threading

import pytest

from deferred_cleanup import cpython_facts

# Every test here uses a `_test_` hook (lose a call, fill the ring): test builds only.
pytestmark = pytest.mark.test_hooks


def _held_burst(dc, n):
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    for i in range(n):
        g.attach(i)
    driver.set_hold(True)
    g.destroy()
    assert driver.held == n
    return driver


def _free_capacity(dc, wait, base, filled):
    """Let the main thread run the filler's no-op pending calls (sleep drops
    the GIL; on re-taking it the eval breaker is recomputed).

    Returns:
        bool: all ``filled`` no-op calls counted since ``base`` ran.
    """
    return wait(lambda: dc._native._test_noop_runs() - base >= filled, timeout_s=10.0)


def test_burst_makes_exactly_one_pending_call(dc, delta, wait, claim_never_stale):
    """10,000 callbacks from 8 threads while the main thread cannot run pending
    calls: exactly one Py_AddPendingCall."""
    n = 10_000
    # One call per claim: the claim never goes stale here (claim_never_stale),
    # so a burst that outlasts stale_claim_s on a loaded machine is not re-armed.
    driver = _held_burst(dc, n)
    d = delta()
    r = dc._native._test_saturate(
        driver, threads=8, max_fill=0
    )  # main thread stays in C++ meanwhile
    assert r["idle"] and r["released"] == n
    after = r["after"]
    assert after["enqueued"] - d.before["enqueued"] == n
    assert after["schedule_attempts"] - d.before["schedule_attempts"] == 1
    assert after["pending_calls"] - d.before["pending_calls"] == 1
    assert after["cleaned"] - d.before["cleaned"] == 0, (
        "nothing can be cleaned while the main thread is in C++"
    )
    assert wait(lambda: d("cleaned") == n)
    assert d("pending_calls") == 1 and d("drain_cycles") == 1


def test_saturation_nothing_cleaned_nothing_lost_then_retry_cleans(dc, delta, wait):
    if dc.variant() != "reference":
        pytest.skip(
            "the direct drain at an entry point is the reference's; the seed runs in subprocess "
            "tests"
        )
    n = 1000
    driver = _held_burst(dc, n)
    d = delta()
    base = dc._native._test_noop_runs()
    r = dc._native._test_saturate(driver, threads=8)
    assert r["filled"] == cpython_facts.assumed("capacity")[0]
    assert r["refused_rc"] == cpython_facts.assumed("full.returns")[0]
    after = r["after"]
    assert after["enqueued"] - d.before["enqueued"] == n, "every callback enqueued"
    assert after["cleaned"] - d.before["cleaned"] == 0, "nothing cleaned while the ring is full"
    assert after["pending_calls"] - d.before["pending_calls"] == 0
    assert after["schedule_failures"] - d.before["schedule_failures"] >= 1
    assert after["scheduled"] is False, "a refusal must give the claim back"
    assert after["queue_empty"] is False
    # Free the capacity: the no-op calls run; nothing of ours was scheduled.
    assert _free_capacity(dc, wait, base, r["filled"])
    assert d("cleaned") == 0 and not dc.counters()["queue_empty"], "nothing is lost while waiting"
    # A retry from an entry point (the reference drains directly on the main thread).
    dc.stats()
    assert d("cleaned") == n
    assert d("direct_drains") >= 1


def test_saturation_retry_off_main_thread_schedules(dc, delta, wait):
    n = 300
    driver = _held_burst(dc, n)
    d = delta()
    base = dc._native._test_noop_runs()
    r = dc._native._test_saturate(driver, threads=4)
    assert r["after"]["cleaned"] - d.before["cleaned"] == 0
    assert _free_capacity(dc, wait, base, r["filled"])
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("poll", dc.poll()))
    t.start()
    t.join(10.0)
    assert out["poll"] == "rescheduled"
    assert d("retries") >= 1
    assert wait(lambda: d("cleaned") == n), "the rescheduled pending call must drain everything"
    assert d("direct_drains") == 0


def test_refusal_then_next_enqueue_schedules(dc, delta, wait):
    """After a refusal the next callback's producer schedules; a retry never
    enqueues again."""
    n = 200
    first = _held_burst(dc, n)
    second = _held_burst(dc, 1)
    d = delta()
    base = dc._native._test_noop_runs()
    r = dc._native._test_saturate(first, threads=4)
    assert r["after"]["schedule_failures"] - d.before["schedule_failures"] >= 1
    assert _free_capacity(dc, wait, base, r["filled"])
    second.release(1)  # not an entry point: only the new producer can schedule
    assert second.wait_idle(10.0)
    assert wait(lambda: d("cleaned") == n + 1)
    assert d("enqueued") == n + 1
    assert d("direct_drains") == 0
    assert d("pending_calls") >= 1
