# SPDX-License-Identifier: Apache-2.0
"""drain.hpp: the main-thread consumer.

Sources: cuda-python PR #2371 (drain takes the whole list); gh-95820
(starvation on 3.10-3.12, facts in cpython_facts); docs/design/drain.rst.
"""

import functools
import operator
import sys
import threading

import pytest
from conftest import LOAD

from deferred_cleanup import cpython_facts

OLD = sys.version_info[:2] <= (3, 12)


def test_ten_thousand_callbacks_from_eight_threads(dc, delta, recorder, wait):
    """More than 32 callbacks: each payload cleaned exactly once, on the main
    thread, with no more pending calls than drain cycles."""
    n, threads = 10_000, 8
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    for i in range(n):
        g.attach(i, recorder)
    driver.set_hold(True)
    g.destroy()
    d = delta()
    assert driver.release(threads) == n
    # Wait in sleeps: no entry point, so every cleanup comes from a pending call.
    assert wait(lambda: d("cleaned") == n, timeout_s=30.0)
    assert driver.wait_idle(10.0)
    assert wait(lambda: not dc.counters()["scheduled"])
    assert recorder.calls == {i: 1 for i in range(n)}
    assert recorder.threads == {threading.main_thread().ident}
    assert d("schedule_failures") == 0
    assert 1 <= d("pending_calls") <= d("drain_cycles")
    assert d("direct_drains") == 0
    assert d("cleanups_off_main") == 0


def test_no_lost_wakeup_over_many_racing_bursts(dc, delta, wait):
    """Producers race with running drains (push/claim vs clear/take).  The main
    thread only sleeps, so every round must finish through pending calls
    alone: a lost wakeup would leave the round's last items queued forever."""
    import random

    rng = random.Random(95820)
    driver = dc.SimulatedDriver()
    total = 0
    d = delta()
    for _ in range(150):
        n = rng.randint(1, 300)
        g = driver.create_graph()
        for i in range(n):
            g.attach(i)
        driver.set_hold(True)
        g.destroy()
        driver.release(rng.randint(1, 8))
        total += n
        assert wait(lambda total=total: d("cleaned") == total, timeout_s=10.0), (
            f"lost wakeup: {total - d('cleaned')} stuck"
        )
    assert driver.wait_idle(10.0)
    assert d("schedule_failures") == 0
    assert d("pending_calls") <= d("drain_cycles") + (1 if dc.counters()["scheduled"] else 0)


def test_raising_finalizer_goes_to_unraisablehook_and_drain_continues(
    dc, recorder, wait, monkeypatch
):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u))

    def bad(obj):
        recorder(obj)
        raise ValueError(f"finalizer of {obj} failed")

    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    for i in range(10):
        g.attach(i, bad if i == 3 else recorder)
    g.destroy()
    assert driver.wait_idle(10.0)
    assert wait(lambda: len(recorder.order) == 10)
    assert sorted(recorder.calls) == list(range(10))
    assert len(seen) == 1
    assert isinstance(seen[0].exc_value, ValueError)
    assert "finalizer of 3 failed" in str(seen[0].exc_value)


def test_raising_del_is_reported_by_cpython(dc, wait, monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u))
    done = []

    class Bad:
        def __del__(self):
            done.append(1)
            raise KeyError("from __del__")

    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    g.attach(Bad())
    g.attach(5, lambda o: done.append(o))
    g.destroy()
    assert driver.wait_idle(10.0)
    assert wait(lambda: len(done) == 2)
    assert any(isinstance(u.exc_value, KeyError) for u in seen)


def test_nested_drain_from_a_finalizer_cleans_nothing_twice(dc, recorder, wait):
    nested = []

    def reenter(obj):
        recorder(obj)
        nested.append(dc.drain_now())
        dc.stats()

    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    for i in range(20):
        g.attach(i, reenter)
    g.destroy()
    assert driver.wait_idle(10.0)
    assert wait(lambda: len(recorder.order) == 20)
    assert recorder.calls == {i: 1 for i in range(20)}
    assert nested == [0] * 20


def test_items_arriving_during_a_drain_are_not_lost(dc, recorder, wait):
    """A finalizer destroys another graph and waits for its destructor: that
    item arrives while the drain runs; the drain's next loop or a new pending
    call takes it."""
    driver = dc.SimulatedDriver()
    g1, g2 = driver.create_graph(), driver.create_graph()
    g2.attach("late", recorder)

    def during(obj):
        recorder(obj)
        g2.destroy()
        assert driver.wait_idle(10.0)

    g1.attach("first", during)
    g1.destroy()
    assert driver.wait_idle(10.0)
    assert wait(lambda: len(recorder.order) == 2)
    assert recorder.order == ["first", "late"]


def test_drain_now_off_main_thread_raises_and_loses_nothing(dc, recorder, wait):
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    g.attach(1, recorder)
    err = []

    def worker():
        try:
            dc.drain_now()
        except dc.NotMainThreadError as e:
            err.append(e)

    t = threading.Thread(target=worker)
    t.start()
    t.join(10.0)
    assert len(err) == 1 and "main thread" in str(err[0])
    assert isinstance(err[0], RuntimeError)
    g.destroy()
    assert driver.wait_idle(10.0)
    assert wait(lambda: recorder.calls == {1: 1})


@pytest.mark.test_hooks
def test_entry_point_drains_directly_when_pending_call_cannot_run(dc, delta, claim_never_stale):
    """The pending call is queued but the main thread has not run it (it was
    in C++); the next entry point drains directly (reference, gh-95820).

    The entry point is called from C right after the saturation (map over the
    two callables): no bytecode, so no eval-breaker check, runs between them,
    and the pending call cannot run first on any version (on 3.13+ it would
    run at the first check, and the test would see a drain cycle instead)."""
    if dc.variant() != "reference":
        pytest.skip("direct drains belong to the reference variant")
    driver = dc.SimulatedDriver()
    g = driver.create_graph()
    for i in range(100):
        g.attach(i)
    driver.set_hold(True)
    g.destroy()
    d = delta()
    steps = [functools.partial(dc._native._test_saturate, driver, threads=4, max_fill=0)]
    steps.append(dc._native.stats)  # an entry point
    steps.append(dc._native.counters)  # not an entry point: right after it, still from C
    r, _, c = list(map(operator.methodcaller("__call__"), steps))
    assert r["after"]["cleaned"] - d.before["cleaned"] == 0
    assert r["after"]["pending_calls"] - d.before["pending_calls"] == 1
    assert c["cleaned"] - d.before["cleaned"] == 100
    assert c["direct_drains"] - d.before["direct_drains"] == 1
    assert c["drain_cycles"] - d.before["drain_cycles"] == 0
    # The pending call is still outstanding; when it runs (at the next
    # eval-breaker check on 3.13+, later on 3.10-3.12) it finds nothing to drain.
    assert d("cleaned") == 100


# ---------------------------------------------------------- starvation (gh-95820), in subprocesses

# The busy loop's length and the delay bound scale with the load measured at
# collection (conftest.LOAD: 1 idle, 4.5 at load 8 on 2 cores): the 200
# destructor calls of 4 driver threads must all come within the busy loop, and
# an entry point every 10 ms on a busy main thread takes longer to be
# scheduled on a loaded machine.  250 ms is generous on an idle one.
BUSY_S = 0.5 * LOAD
ENTRY_MS = 10.0
DELAY_BOUND_MS = 250.0 * LOAD


def test_seed_starves_while_main_thread_runs_python(scenario):
    out = scenario("starvation", "busy", "200", str(BUSY_S), str(ENTRY_MS), variant="seed")
    assert out["rc"] == 0, out["stderr"]
    r = out["result"]
    assert r["delivered_in_busy"] == 200, "every destructor ran during the busy loop"
    if cpython_facts.assumed("delay.busy_python")[0] == "starved":
        assert r["cleaned_in_busy"] is False, (
            "gh-95820: the seed's pending call must starve on this version"
        )
    else:
        assert r["cleaned_in_busy"] is True
    assert r["cleaned_after_sleep"] is True, "the seed cleans once the GIL is dropped"
    assert r["direct_drains"] == 0


def test_seed_entry_points_do_not_help(scenario):
    out = scenario("starvation", "entry", "200", str(BUSY_S), str(ENTRY_MS), variant="seed")
    assert out["rc"] == 0, out["stderr"]
    r = out["result"]
    if cpython_facts.assumed("delay.busy_python")[0] == "starved":
        assert r["cleaned_in_busy"] is False, "the seed only reschedules at entry points"
    assert r["cleaned_after_sleep"] is True
    assert r["direct_drains"] == 0


def test_reference_cleans_at_next_entry_point_with_bounded_delay(scenario):
    out = scenario("starvation", "entry", "200", str(BUSY_S), str(ENTRY_MS), variant="reference")
    assert out["rc"] == 0, out["stderr"]
    r = out["result"]
    assert r["cleaned_in_busy"] is True
    assert r["delay_ms"] is not None and 0 <= r["delay_ms"] < DELAY_BOUND_MS, r
    if cpython_facts.assumed("delay.busy_python")[0] == "starved":
        assert r["direct_drains"] >= 1, "on 3.10-3.12 only the direct drain can have cleaned"
    sys.stdout.write(f"\nreference delay under a busy main thread: {r['delay_ms']:.3f} ms\n")


# -------------------------------------------------------------- a main thread in one blocking wait
def test_a_main_thread_blocked_in_join_releases_only_after_it(scenario):
    """cuda-core's lifetime-test shape (NVIDIA/cuda-python #2403; docs Caveats):
    a worker releases the destructor call and polls for 1 s while the main
    thread is in ``worker.join()``.  The pending call cannot run inside that one
    C call: the payload is released on the main thread, after the join.  The
    callback may fire before the main thread reaches its join on a loaded
    machine (then it is released at once): up to 5 attempts, stop at the first
    witness.  A sleeping loop on the main thread releases it at once."""
    seen = []
    for _ in range(5):
        out = scenario("poll_from_worker", "join", "1.0", timeout_s=60)
        assert out["rc"] == 0, out["stderr"]
        r = out["result"]
        seen.append(r)
        assert r["release_thread"] == "main", r
        if not r["released"]:
            assert r["release_s"] is not None and r["release_s"] >= 1.0, r
            break
    else:
        pytest.fail(f"the callback fired before join() in all of 5 attempts: {seen}")
    out = scenario("poll_from_worker", "sleep", "5.0", timeout_s=60)
    assert out["rc"] == 0, out["stderr"]
    r = out["result"]
    # 5.0 is the length of the sleeping loop: released during it is the rule
    # (a pending call runs in a sleeping loop), not a speed check.
    assert r["released"] is True and r["release_thread"] == "main" and r["release_s"] < 5.0, (
        f"not released during the 5 s sleeping loop: {r}"
    )
