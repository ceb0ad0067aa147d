#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How often a fork() child gets no pending call because the fork cut a
Py_AddPendingCall of another thread (docs Caveats, fork()).

Runs tests/scenarios/fork_child.py in mode ``main`` (fork on the main thread
while the simulated driver's threads deliver and schedule) RUNS times with
the interpreter it is started with, each pinned to one CPU (a preempted
driver thread is what a fork cuts), and counts the children that released
fewer than 20 payloads by a pending call in their first second (any number
below 20, so partial releases count too), split into those with
``adds_cut_by_fork > 0`` (the named case) and the others (unexplained).
Writes one JSON object, stamped with tools/provenance.py:

    {"python": "3.15.2", "runs": N, "cpu": 0, "no_pending_call": K,
     "with_cut_add": K1, "unexplained": K2, "examples": [child results],
     "seconds": S, "provenance": {...}}

Usage (with the interpreter of a matrix environment):
    tools/matrix.py run cp315-sid -- sh -c '$PY tools/fork_cut_rate.py --runs 1000 --out F.json'
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import provenance  # noqa: E402  (tools/provenance.py)

SCENARIO = REPO / "tests" / "scenarios" / "fork_child.py"
# The package's C++ (the scenario child uses no module of the Python package).
GLOBS = [
    *provenance.package_globs(without=("reference/python/deferred_cleanup/*.py",)),
    "tests/scenarios/fork_child.py",
    "tools/fork_cut_rate.py",
]


def one_run(tmp: Path, i: int, cpu: int) -> dict:
    """One scenario process pinned to ``cpu`` (int).

    Returns:
        dict: the child's record, with the parent's ``child_s`` (float,
        seconds) added.

    Raises:
        RuntimeError: the scenario or its child failed (non-zero status, no
        record, or a child that hung or exited non-zero; a debug build that
        aborts in CPython's ring asserts shows here).
        subprocess.TimeoutExpired: the scenario took over 60 s.
        FileNotFoundError: no ``taskset``.
    """
    path = tmp / f"c{i}.json"
    p = subprocess.run(
        ["taskset", "-c", str(cpu), sys.executable, str(SCENARIO), "main", str(path)],
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=60,
    )
    if p.returncode != 0 or not path.exists():
        raise RuntimeError(f"run {i}: rc {p.returncode}: {p.stderr[-2000:]}")
    try:
        parent = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError) as e:
        raise RuntimeError(f"run {i}: no result line: {p.stdout[-500:]}") from e
    if parent.get("child_rc") != 0:
        raise RuntimeError(f"run {i}: child {parent}")
    child = json.loads(path.read_text())
    child["child_s"] = parent["child_s"]
    return child


def main() -> int:
    """Run the forks, write ``--out`` and print the summary.

    Returns:
        int: 0.  Raises what :func:`one_run` raises (the run stops there).
    """
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000, help="forks to make (int)")
    ap.add_argument("--cpu", type=int, default=0, help="the CPU to pin each run to (int)")
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    a = ap.parse_args()
    t0 = time.monotonic()
    examples, with_cut, unexplained = [], 0, 0
    with tempfile.TemporaryDirectory() as d:
        for i in range(a.runs):
            child = one_run(Path(d), i, a.cpu)
            if child["released_by_pending_call"] < 20:
                if child["adds_cut_by_fork"] > 0:
                    with_cut += 1
                else:
                    unexplained += 1
                examples.append(child)
            if (i + 1) % 100 == 0:
                print(
                    f"[fork_cut_rate] {i + 1}/{a.runs}: {with_cut} with a cut add, "
                    f"{unexplained} unexplained",
                    flush=True,
                )
    out = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "runs": a.runs,
        "cpu": a.cpu,
        "no_pending_call": with_cut + unexplained,
        "with_cut_add": with_cut,
        "unexplained": unexplained,
        "examples": examples[:10],
        "seconds": round(time.monotonic() - t0, 1),
    }
    a.out.write_text(json.dumps(out, indent=2) + "\n")
    subprocess.run(
        [sys.executable, str(REPO / "tools" / "provenance.py"), "stamp", str(a.out)]
        + [x for g in GLOBS for x in ("--glob", g)],
        check=True,
    )
    print(json.dumps({k: v for k, v in out.items() if k != "examples"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
