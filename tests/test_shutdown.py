# SPDX-License-Identifier: Apache-2.0
"""shutdown.hpp: no call into CPython after teardown; leaks counted.

Every case runs in a fresh interpreter (tests/scenarios/), under a timeout.
The Py_AtExit backstop writes the final counters with C stdio
(DC_STATS_AT_EXIT).  CPython facts (what Py_AddPendingCall does after
finalization) come from cpython_facts.  Sources: docs/design/shutdown.rst;
Python/pylifecycle.c Py_FinalizeEx; cuda-python PR #2371.
"""

import signal

import pytest

from deferred_cleanup import cpython_facts


def _accounting(out, created):
    """Exit 0, no cleanup after teardown, cleaned + leaked == created."""
    assert out["rc"] == 0, f"rc={out['rc']}\n{out['stderr']}"
    s = out["at_exit"]
    assert s is not None, "the Py_AtExit backstop wrote no counters"
    assert s["created"] == created
    assert s["cleanups_after_shutdown"] == 0, "a payload was touched after teardown"
    assert s["cleaned"] + s["leaked_at_shutdown"] == created, s
    assert s["enqueued"] == created
    assert s["in_flight_at_backstop"] == 0
    return s


@pytest.mark.parametrize("mode", ["burst", "atexit-destroy"])
def test_reference_payloads_in_flight_at_exit(scenario, mode):
    """Destructors still running when the program ends: the exit sequence
    waits for them (bounded) and releases every payload."""
    out = scenario("exit_in_flight", "2000", "8", mode, variant="reference")
    s = _accounting(out, 2000)
    assert s["gate_timeouts"] == 0
    assert s["cleaned"] == 2000 and s["leaked_at_shutdown"] == 0, s


def test_reference_final_drain_cleans_what_is_queued(scenario):
    """Graphs destroyed by an atexit handler that runs before ours, which
    waits until every destructor ran: everything is queued before the hook,
    so the final drain (interpreter alive) cleans all of it; nothing leaks."""
    out = scenario("exit_in_flight", "200", "1", "atexit-destroy", variant="reference")
    s = _accounting(out, 200)
    assert s["cleaned"] == 200 and s["leaked_at_shutdown"] == 0
    assert s["enqueued_late"] == 0


@pytest.mark.test_hooks
def test_reference_waits_out_a_producer_held_in_the_gate(scenario):
    out = scenario("held_in_gate", "300", variant="reference")
    assert out["result"] == {"held": True, "created": 1}
    s = _accounting(out, 1)
    assert s["gate_timeouts"] == 0
    assert s["host_calls_after_teardown"] == 0, (
        "the held producer called CPython after the shutdown hook"
    )
    assert s["gate_hook_passes"] == 1
    assert s["cleaned"] == 1, "the final drain runs after the held producer left the gate"
    assert s["schedule_attempts"] == 1


@pytest.mark.test_hooks
def test_cuda_core_fixed_waits_out_a_producer_held_after_its_finalizing_check(scenario):
    """cuda-core-1.2-fixed's finalization fix (policy.hpp,
    CudaCore12FixedPolicy::gate): a destructor callback held for 300 ms
    after the shipped `!Py_IsInitialized() || finalizing` test, just before
    Py_AddPendingCall, while the interpreter exits.  Its atexit-phase hook
    waits for it inside the gate, so the call reaches a live interpreter and
    the final drain releases the payload; cuda-core-1.2 in the same window
    calls CPython after finalization
    (test_comparison_variant_held_producer_calls_cpython_after_finalization)."""
    out = scenario("held_in_gate", "300", variant="cuda-core-1.2-fixed")
    assert out["result"] == {"held": True, "created": 1}
    s = _accounting(out, 1)
    assert s["gate_timeouts"] == 0 and s["gate_hook_passes"] == 1, s
    assert s["host_calls_after_teardown"] == 0, (
        "the held producer called CPython after finalization: the gate did not hold exit"
    )
    assert s["schedule_attempts"] == 1 and s["cleaned"] == 1, s


@pytest.mark.test_hooks
def test_reference_final_drain_comes_after_the_gate_wait(scenario):
    """A producer held in the gate at exit; while the exit sequence waits it
    out, another destructor pushes (after the close, so it gets no pending
    call).  The final drain runs after the gate wait, so it releases that
    payload too, on the main thread; a drain before the wait would leak it."""
    out = scenario("pushed_during_gate_wait", variant="reference")
    assert out["result"] == {"held": True, "created": 2}, out["stderr"]
    s = _accounting(out, 2)
    assert s["gate_timeouts"] == 0
    assert s["gate_hook_passes"] == 1 and s["schedule_attempts"] == 1, s  # B: no pending call
    released = sorted(ln for ln in out["stdout"].splitlines() if ln.startswith("released "))
    assert released == ["released A main=True", "released B main=True"], (released, s)
    assert s["cleaned"] == 2 and s["leaked_at_shutdown"] == 0, s


@pytest.mark.test_hooks
@pytest.mark.parametrize("variant", ["seed", "cuda-core-1.2"])
def test_comparison_variant_held_producer_calls_cpython_after_finalization(scenario, variant):
    """The comparison variants' hole: a producer held between its last check
    (seed: accepting_, stopped only by the Py_AtExit callback; cuda-core-1.2:
    `!Py_IsInitialized() || finalizing`) and Py_AddPendingCall calls CPython
    after Py_FinalizeEx.  Crashes 3.10-3.12, silent no-op on 3.13+
    (cpython_facts, after_finalize.outcome)."""
    out = scenario("held_in_gate", "until-release", variant=variant)
    assert out["result"] == {"held": True, "created": 1}
    outcome = cpython_facts.assumed("after_finalize.outcome")[0]
    if outcome == "crash":
        sig = getattr(signal, cpython_facts.assumed("after_finalize.signal")[0])
        assert out["rc"] == -sig, f"expected {variant} to die of {sig!r}, rc={out['rc']}"
        assert out["at_exit"] is None, (
            "the process died inside the backstop, before writing counters"
        )
    else:
        assert outcome == "no-op"
        s = _accounting(out, 1)
        assert s["schedule_attempts"] == 1 and s["gate_hook_passes"] == 1
        assert s["host_calls_after_teardown"] == 1, (
            f"{variant}'s held producer calls CPython after finalization"
        )
        assert s["leaked_at_shutdown"] == 1 and s["cleaned"] == 0


@pytest.mark.parametrize("variant", ["reference", "seed", "cuda-core-1.2", "cuda-core-1.2-fixed"])
def test_callbacks_after_finalization_only_enqueue(scenario, variant):
    out = scenario("late_callbacks", "500", "4", variant=variant)
    assert out["result"] == {"created": 500, "held": 500}
    s = _accounting(out, 500)
    assert s["leaked_at_shutdown"] == 500 and s["cleaned"] == 0
    assert s["enqueued_late"] == 500
    assert s["schedule_attempts"] == 0, "no Py_AddPendingCall after finalization"


def test_api_after_shutdown(scenario, tmp_path):
    path = tmp_path / "late.json"
    out = scenario("after_shutdown_api", str(path), variant="reference")
    import json

    late = json.loads(path.read_text())
    assert late["accepting"] is False and late["host_alive"] is False
    assert late["attach"] == "ShutdownError"
    assert late["attach_refcount_delta"] == 0, "a refused attach must not keep the object"
    assert late["drain_now"] == "ShutdownError"
    assert late["destroy"] == "ok"
    s = _accounting(out, 1)
    assert s["leaked_at_shutdown"] == 1 and s["cleaned"] == 0


def test_daemon_thread_in_a_blocking_call_never_aborts_exit(scenario):
    """A daemon thread looping on SimulatedDriver.wait_idle (GIL released)
    while the main thread exits: CPython ends such a thread when it re-takes
    the GIL during finalization; the call must never re-take it then (it
    parks instead), so the process exits 0.  50 runs."""
    bad = []
    for run in range(50):
        out = scenario("daemon_wait_idle", timeout_s=30)
        if out["rc"] != 0:
            bad.append((run, out["rc"], out["stderr"][-300:]))
    assert bad == [], f"{len(bad)} of 50 runs did not exit 0: {bad[:3]}"


def test_a_daemon_thread_inside_a_blocking_call_parks_at_finalization(scenario):
    """The daemon thread waits in SimulatedDriver.wait_idle (GIL released) on
    a driver whose thread is paused, so it is inside the call when
    finalization begins; when the call returns it must park, not take the
    GIL back (counted in daemon_parks, which the Py_AtExit backstop writes
    after finalization).  Whether the daemon wakes before the backstop runs
    is timing, so the test stops at the first run that shows a park, up to
    20 runs, and reports the counts."""
    parks = []
    for _ in range(20):
        out = scenario("daemon_wait_idle", "paused", timeout_s=30)
        assert out["rc"] == 0, out["stderr"][-500:]
        assert out["at_exit"] is not None, out["stderr"][-500:]
        parks.append(out["at_exit"]["daemon_parks"])
        if parks[-1]:
            break
    assert parks[-1] == 1, f"no daemon thread parked in {len(parks)} runs: {parks}"


@pytest.mark.parametrize("variant", ["seed", "cuda-core-1.2"])
def test_comparison_variant_window_is_measured(scenario, variant, tmp_path):
    """The width of each comparison variant's window, as the backstop
    measures it: seed, from the end of the Python atexit phase (finalization
    begins) to its Py_AtExit callback; cuda-core-1.2, the widest interval
    between its finalizing check and Py_AddPendingCall (graphs destroyed by
    an atexit handler that waits until every destructor ran, so the
    producers schedule while the interpreter is alive).  Written to
    build/shutdown-windows/."""
    out = scenario("exit_in_flight", "200", "4", "atexit-destroy", variant=variant)
    assert out["rc"] == 0, out["stderr"]
    s = out["at_exit"]
    assert s["exit_to_backstop_ns"] > 0, s
    if variant == "cuda-core-1.2":
        assert s["check_to_call_ns_max"] > 0, s
    dest = (
        __import__("pathlib").Path(__file__).resolve().parent.parent / "build" / "shutdown-windows"
    )
    dest.mkdir(parents=True, exist_ok=True)
    # Every interpreter's job writes this file, and they may run at once: a
    # whole file (a rename), never two writes interleaved.
    tmp = dest / f".{variant}.{__import__('os').getpid()}.json"
    tmp.write_text(
        __import__("json").dumps(
            {
                "variant": variant,
                "exit_to_backstop_ns": s["exit_to_backstop_ns"],
                "check_to_call_ns_max": s["check_to_call_ns_max"],
            }
        )
    )
    tmp.replace(dest / f"{variant}.json")
