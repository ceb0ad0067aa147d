# SPDX-License-Identifier: Apache-2.0
"""The in-flight gate's store-buffering pair on this machine's CPU, with the real queue code.

``tests/cpp/gate_sb.cpp`` races, once per iteration on a freshly built queue,
a producer's real ``gate_enter()`` (``in_flight_`` increment, then the read of
``accepting_``) against shutdown's real ``close()`` followed by one read of
``in_flight()``, two threads pinned to different CPUs when possible.  A
*witness* is an iteration in which shutdown read ``in_flight() == 0`` while the
producer, still inside the gate, had read ``accepting_ == true``: the producer
would call ``Py_AddPendingCall`` after shutdown concluded that nobody is
inside (on CPython 3.10-3.12, after finalization, that crashes).

* ``close-release``, a test-only policy declared in the program: the
  reference's policy with only ``gate_close`` weakened to release (the shape of
  the mutant ``tests/mutants/sb_gate_close.py``).  On x86-64 its close is a
  plain ``mov`` followed by a plain load of ``in_flight_``: it must show at
  least one witness within 10**6 iterations (the run stops at the first
  witness; on this machine one comes about every hundred iterations).  On
  another architecture a run without a witness skips with the counts as its
  reason.
* ``reference`` (seq_cst on all four operations) must show none in 3 * 10**6
  iterations, and the run must have raced: both orders (shutdown first,
  producer first) each in at least 1 % of the iterations.

With the mutant applied, ``ReferencePolicy`` itself closes with release and the
reference run shows witnesses: tools/mutate.py runs this file as one of the
mutant's checks (with ``DC_MATRIX=1`` in its environment, as for the mutant's
litmus check).

Runs once per ``make test`` (marker ``hardware``), not per interpreter: the C++
program does not involve Python.  ``make lost-wakeup`` runs the same program
for the counts shown in the docs (notes/lost-wakeup/gate-sb.json).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from conftest import build_race_program, hang_guard

pytestmark = pytest.mark.hardware

CONTROL_BOUND = 10**6  # iterations the weakened control may take to show its first witness
REFERENCE_N = 3 * 10**6  # iterations the reference must run without one (20-40 s here)
RACED_SHARE = 0.01  # least share of the reference's iterations for each order


@pytest.fixture(scope="module")
def gate_sb() -> Path:
    """Build ``tests/cpp/gate_sb.cpp`` (CMake, -O2) and return the binary.

    Returns:
        Path: the ``gate_sb`` executable.

    Raises:
        pytest.fail: when cmake or a C++ compiler is missing, or the build fails.
    """
    return build_race_program("gate_sb")


def run(binary: Path, tmp_path: Path, policy: str, iterations: int) -> tuple[dict, dict, float]:
    """Run the program for one policy, stopping at the first witness.

    Args:
        binary (Path): the gate_sb executable.
        tmp_path (Path): where the JSON goes.
        policy (str): ``reference`` or ``close-release``.
        iterations (int): the most iterations to run.

    Returns:
        tuple: (the policy's result dict, the whole JSON dict, wall seconds).
    """
    out = tmp_path / f"{policy}.json"
    argv = [
        str(binary),
        "--policy",
        policy,
        "--iterations",
        str(iterations),
        "--stop-at-first",
        "--json",
        str(out),
    ]
    t0 = time.monotonic()
    p = subprocess.run(
        argv, capture_output=True, text=True, timeout=hang_guard(540)
    )  # a hang guard, scaled by the load
    wall = time.monotonic() - t0
    print(p.stdout.strip(), f"(wall {wall:.1f} s)")
    assert p.returncode == 0, (
        f"impossible outcome (in_flight() read other than 0 or 1, or a gate not empty at the "
        f"end of a batch):\n{p.stdout}\n{p.stderr}"
    )
    data = json.loads(out.read_text())
    (result,) = [v for v in data["policies"] if v["policy"] == policy]
    assert result["impossible"] == 0, result
    return result, data, wall


def describe(r: dict, data: dict, wall: float) -> str:
    """One line with every count of a run, for assertion messages and skips.

    Args:
        r (dict): the policy's result.
        data (dict): the whole JSON (machine, CPU).
        wall (float): wall seconds.

    Returns:
        str: the counts, the CPU and the time.
    """
    return (
        f"{r['witnesses']} witnesses in {r['iterations']} iterations (first at "
        f"{r['first_witness_at']}), shutdown first {r['shutdown_first']}, producer first "
        f"{r['producer_first']}, both saw {r['both_saw']}; {data['cpu']} "
        f"({data['machine']}), pinned={r['pinned']}, {wall:.1f} s"
    )


@pytest.mark.timeout(hang_guard(600))  # a hang guard
def test_release_close_lets_a_producer_past_shutdown(gate_sb, tmp_path):
    """Negative control: a release close() then in_flight() shows the store-buffering outcome."""
    r, data, wall = run(gate_sb, tmp_path, "close-release", CONTROL_BOUND)
    counts = describe(r, data, wall)
    if r["witnesses"] == 0 and data["machine"] not in ("x86_64", "AMD64"):
        pytest.skip(f"close-release: {counts}: this CPU did not show the store-buffering outcome")
    assert r["witnesses"] >= 1, (
        f"close-release: {counts}: x86-TSO allows a plain store then a plain load to reorder, "
        f"and this harness showed it before; none within {CONTROL_BOUND} means the harness "
        f"no longer makes the two threads race"
    )
    assert r["iterations"] <= CONTROL_BOUND


@pytest.mark.timeout(hang_guard(600))  # a hang guard
def test_reference_gate_never_lets_a_producer_past_shutdown(gate_sb, tmp_path):
    """seq_cst close() and in_flight() against seq_cst gate_enter(): no witness, a real race."""
    r, data, wall = run(gate_sb, tmp_path, "reference", REFERENCE_N)
    counts = describe(r, data, wall)
    assert r["witnesses"] == 0, f"reference: a producer entered unseen by shutdown: {counts}"
    assert r["iterations"] == REFERENCE_N, counts
    for order in ("shutdown_first", "producer_first"):
        assert r[order] >= RACED_SHARE * REFERENCE_N, (
            f"reference: the threads did not race ({order}): {counts}"
        )
