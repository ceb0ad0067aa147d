# SPDX-License-Identifier: Apache-2.0
"""Shutdown soak: the finalization scenarios, many times each, counted.

Each case runs a scenario of ``tests/scenarios/`` in a fresh interpreter
``SOAK_N`` times (environment; 20 in ``make test``, 200 in ``make soak``) and
tallies, per case:

* crashes: the child died of a signal or exited non-zero;
* hangs: the child did not exit within its timeout (killed);
* missing payloads: the counters the Py_AtExit backstop wrote to
  ``DC_STATS_AT_EXIT`` say cleaned + leaked != created, or a cleanup ran after
  teardown, or there are no counters at all from a child that exited 0.

The reference must show zero of each in every case.  The seed variant
(cuda-python PR #2371, reproduced with ``DEFERRED_CLEANUP_VARIANT=seed``) is
run in the one case where its outcome is a CPython fact: a driver thread held
inside the gate window until after ``Py_FinalizeEx`` then calls
``Py_AddPendingCall``, which crashes 3.10-3.12 and is a silent no-op on 3.13+
(``cpython_facts``, field ``after_finalize.outcome``); every run must show that
outcome.

A summary per interpreter is written to ``build/soak/<matrix column>.json``
(e.g. ``cp312-pyenv.json``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from deferred_cleanup import cpython_facts

pytestmark = pytest.mark.soak

SOAK_N = int(os.environ.get("SOAK_N", "20"))
RUN_TIMEOUT_S = 30.0
REPO = Path(__file__).resolve().parent.parent

# (case id, scenario, args, payloads created)
REFERENCE_CASES = [
    ("exit_in_flight-burst", "exit_in_flight", ("500", "8", "burst"), 500),
    ("exit_in_flight-atexit-destroy", "exit_in_flight", ("200", "4", "atexit-destroy"), 200),
    pytest.param(
        "held_in_gate-20ms",
        "held_in_gate",
        ("20",),
        1,
        marks=pytest.mark.test_hooks,
        id="held_in_gate-20ms",
    ),
    ("late_callbacks", "late_callbacks", ("100", "8"), 100),
]


def _tally(runs: list[dict]) -> dict:
    return {k: sum(r[k] for r in runs) for k in ("crashes", "hangs", "missing")} | {
        "runs": len(runs)
    }


def _classify(out: dict | None, created: int) -> dict:
    """One run's verdict.

    Args:
        out: run_scenario()'s dict, or None when the child hung.
        created: payloads the scenario creates (int).
    Returns:
        dict with crashes, hangs, missing (0 or 1 each), rc (int or None) and
        why (str).
    """
    if out is None:
        return {"crashes": 0, "hangs": 1, "missing": 0, "rc": None, "why": "timeout"}
    if out["rc"] != 0:
        sig = -out["rc"] if out["rc"] < 0 else None
        name = signal.Signals(sig).name if sig else f"exit {out['rc']}"
        return {"crashes": 1, "hangs": 0, "missing": 0, "rc": out["rc"], "why": name}
    s = out["at_exit"]
    if s is None:
        return {
            "crashes": 0,
            "hangs": 0,
            "missing": 1,
            "rc": 0,
            "why": "no counters from the backstop",
        }
    bad = []
    if s["cleaned"] + s["leaked_at_shutdown"] != created:
        bad.append(
            f"cleaned {s['cleaned']} + leaked {s['leaked_at_shutdown']} != created {created}"
        )
    if s["created"] != created:
        bad.append(f"created {s['created']} != {created}")
    if s["cleanups_after_shutdown"] != 0:
        bad.append(f"{s['cleanups_after_shutdown']} cleanups after teardown")
    if s["variant"] == "reference" and s["host_calls_after_teardown"] != 0:
        # On 3.13+ such a call is a silent no-op (no crash), so only this
        # counter shows that the in-flight gate let a producer through.
        bad.append(f"{s['host_calls_after_teardown']} Py_AddPendingCall after teardown")
    return {
        "crashes": 0,
        "hangs": 0,
        "missing": int(bool(bad)),
        "rc": 0,
        "why": "; ".join(bad) or "ok",
    }


def _soak(scenario, name: str, args: tuple, created: int, variant: str, n: int) -> list[dict]:
    runs = []
    for _ in range(n):
        try:
            out = scenario(name, *args, variant=variant, timeout_s=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            out = None
        runs.append(_classify(out, created))
    return runs


def _write_summary(case: str, variant: str, tally: dict, extra: dict | None = None) -> None:
    tag = Path(sys.prefix).name  # the matrix names each virtual environment after its column
    if not tag.startswith("cp"):
        tag = f"{sys.implementation.name}-{sys.version_info[0]}.{sys.version_info[1]}"
        if sysconfig.get_config_var("Py_DEBUG"):
            tag += "d"
    path = REPO / "build" / "soak" / f"{tag}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(path.read_text()) if path.exists() else {}
    data[f"{variant}:{case}"] = (
        tally | (extra or {}) | {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    )
    path.write_text(json.dumps(data, indent=1, sort_keys=True))


@pytest.mark.timeout(60 + int(3 * RUN_TIMEOUT_S) * max(SOAK_N, 1))
@pytest.mark.parametrize(
    "case,name,args,created",
    REFERENCE_CASES,
    ids=[getattr(c, "id", None) or c[0] for c in REFERENCE_CASES],
)
def test_reference_soak(scenario, case, name, args, created):
    runs = _soak(scenario, name, args, created, "reference", SOAK_N)
    tally = _tally(runs)
    _write_summary(case, "reference", tally)
    failures = [r["why"] for r in runs if r["why"] != "ok"]
    assert tally["runs"] == SOAK_N
    assert tally["crashes"] == 0 and tally["hangs"] == 0 and tally["missing"] == 0, (
        f"{case}: {tally}; first failures: {failures[:5]}"
    )


@pytest.mark.test_hooks
@pytest.mark.timeout(60 + int(3 * RUN_TIMEOUT_S) * max(SOAK_N, 1))
def test_seed_held_in_gate_outcome_is_the_cpython_fact(scenario):
    """The seed's window, SOAK_N times: every run shows what CPython does with
    Py_AddPendingCall after Py_FinalizeEx on this version."""
    outcome = cpython_facts.assumed("after_finalize.outcome")[0]
    runs = _soak(scenario, "held_in_gate", ("until-release",), 1, "seed", SOAK_N)
    tally = _tally(runs)
    _write_summary("held_in_gate-until-release", "seed", tally, {"expected": outcome})
    assert tally["hangs"] == 0, tally
    if outcome == "crash":
        sig = getattr(signal, cpython_facts.assumed("after_finalize.signal")[0])
        rcs = sorted({r["rc"] for r in runs})
        assert tally["crashes"] == SOAK_N and rcs == [-sig], (
            f"expected every run to die of {sig!r}: rc {rcs}"
        )
    else:
        assert outcome == "no-op", outcome
        assert tally["crashes"] == 0 and tally["missing"] == 0, (
            tally,
            [r["why"] for r in runs if r["why"] != "ok"][:5],
        )


def test_classify_counts_what_it_should():
    """The verdicts themselves: a crash, a hang and a miscount are each seen."""
    good = {
        "variant": "reference",
        "cleaned": 3,
        "leaked_at_shutdown": 2,
        "created": 5,
        "cleanups_after_shutdown": 0,
        "host_calls_after_teardown": 0,
    }
    assert _classify({"rc": 0, "at_exit": good}, 5)["why"] == "ok"
    assert _classify({"rc": -signal.SIGSEGV, "at_exit": None}, 5)["crashes"] == 1
    assert _classify(None, 5)["hangs"] == 1
    assert _classify({"rc": 0, "at_exit": dict(good, cleaned=2)}, 5)["missing"] == 1
    assert _classify({"rc": 0, "at_exit": dict(good, cleanups_after_shutdown=1)}, 5)["missing"] == 1
    assert _classify({"rc": 0, "at_exit": None}, 5)["missing"] == 1
    assert (
        _classify({"rc": 0, "at_exit": dict(good, host_calls_after_teardown=1)}, 5)["missing"] == 1
    )
    assert (
        _classify({"rc": 0, "at_exit": dict(good, variant="seed", host_calls_after_teardown=1)}, 5)[
            "why"
        ]
        == "ok"
    )
