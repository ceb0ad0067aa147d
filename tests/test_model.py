"""Model checking of the deferred-cleanup protocol with spin.

``tests/model/deferred_cleanup.pml`` models N driver callbacks, a pending-call
queue of capacity K that refuses when full (shared with foreign pending calls),
the main thread's pending-call drain and direct drain at entry points, retries
from another thread's entry points, the shutdown sequence (atexit hook closing
the gate, waiting out producers inside it, final drain, host dead, teardown)
and late callbacks.  ``tests/model/run.py`` compiles one exhaustive pan
verifier per check; this file asserts what each must report:

* the protocol, N=3 and K=1, 2 (and N=4, K=1 for safety): no assertion violation and no invalid end
  state (exactly once or leaked; nothing after teardown; at most one pending
  call outstanding), and the liveness claim ``drained`` holds under weak
  fairness (an item queued while the interpreter runs is eventually taken
  unless a refusal left it to the next entry point);
* each negative variant (LOST_WAKEUP, NO_GATE, RETRY_ENQUEUES): spin finds the
  counterexample it is meant to find;
* each witness: the verified model reaches the behaviour it names (refusals,
  late callbacks, waits at the gate, leaks, ...), so the clean result above is
  not the result of a model that never gets there.

The state-space numbers are checked against floors: a model that lost its
interleavings (a stuck producer, a guard that is never true) verifies with a
few hundred states and fails here.

Runs once, in the Debian unstable root (marker ``tools``), where spin lives.
"""
from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.tools,
    pytest.mark.skipif(shutil.which("spin") is None or shutil.which("gcc") is None,
                       reason="spin or gcc not installed (both are in the Debian unstable root: marker 'tools', env cp314-sid)"),
]

RUNNER = Path(__file__).resolve().parent / "model" / "run.py"
_spec = importlib.util.spec_from_file_location("dc_model_runner", RUNNER)
runner = importlib.util.module_from_spec(_spec)
sys.modules["dc_model_runner"] = runner
_spec.loader.exec_module(runner)

CHECKS = {c.name: c for c in runner.CHECKS}

# Floors for "states, stored": a tenth or less of what the model has (see the
# Verification page for the measured numbers).
STATE_FLOOR = {
    "safety_n3_k1": 200_000,
    "safety_n3_k2": 300_000,
    "liveness_n3_k1": 300_000,
    "liveness_n3_k2": 500_000,
    "safety_n4_k1": 1_400_000,
}

# What each negative variant must be caught by.
SIGNATURE = {
    "lost_wakeup": "acceptance cycle",
    "no_gate": "assertion violated (interp!=2)",
    "retry_enqueues": ("assertion violated (cleaned<=pushed)", "assertion violated ((cleaned+leaked)==3)"),
}


def run(name: str, tmp_path: Path) -> dict:
    return runner.run_check(CHECKS[name], tmp_path, timeout=240)


def _fail_msg(r: dict) -> str:
    return f"{r['name']} ({' '.join(r['macros'])}):\n{r['output'][-3000:]}"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(STATE_FLOOR))
def test_protocol_verifies(name, tmp_path):
    r = run(name, tmp_path)
    assert r["errors"] == 0, _fail_msg(r)
    assert not r["trail"], _fail_msg(r)
    assert "Search not completed" not in r["output"], _fail_msg(r)
    assert "max search depth too small" not in r["output"], _fail_msg(r)
    assert r["states_stored"] is not None and r["states_stored"] >= STATE_FLOOR[name], _fail_msg(r)
    assert r["depth"] is not None and 50 < r["depth"] < runner.DEPTH_BOUND, _fail_msg(r)
    if r["liveness"]:
        assert "acceptance   cycles \t+ (fairness enabled)" in r["output"], _fail_msg(r)
    # Every statement of the threads that call into the queue is reachable.
    for proc in ("producer", "retrier", "foreign"):
        assert not [u for u in r["unreached"] if u.startswith(proc + ":")], _fail_msg(r)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(SIGNATURE))
def test_negative_variant_is_caught(name, tmp_path):
    r = run(name, tmp_path)
    assert r["errors"] and r["errors"] >= 1, f"spin found no counterexample: {_fail_msg(r)}"
    assert r["trail"], _fail_msg(r)
    sig = SIGNATURE[name]
    sigs = sig if isinstance(sig, tuple) else (sig,)
    assert any(s in r["output"] for s in sigs), f"caught, but not by {sigs}: {_fail_msg(r)}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("k", sorted(runner.WITNESSES))
def test_witness_is_reachable(k, tmp_path):
    r = run(f"witness{k}", tmp_path)
    assert r["errors"] and r["errors"] >= 1, f"not reachable: {runner.WITNESSES[k]}: {_fail_msg(r)}"
    assert f"(({k}=={k})" in (r["assertion"] or ""), _fail_msg(r)


def test_every_check_is_tested():
    """No check in the runner escapes this file."""
    covered = set(STATE_FLOOR) | set(SIGNATURE) | {f"witness{k}" for k in runner.WITNESSES}
    assert covered == set(CHECKS)
