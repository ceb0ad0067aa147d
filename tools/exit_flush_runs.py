#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Run the exit-time flush scenario many times on one interpreter and record
the counts (issue: a cleanup's KeyboardInterrupt or SystemExit in CPython's
exit-time pending-call flush is never reported as a SystemError).

Each run is a fresh child of ``tests/scenarios/exit_interrupt_at_flush.py``
(the same scenario as ``tests/test_exit.py::
test_an_interrupt_in_the_exit_time_flush_is_never_a_system_error``),
alternating KeyboardInterrupt and SystemExit(3); the Py_AtExit backstop
writes the child's counters (``DC_STATS_AT_EXIT``).  Counted per run: a
witness (``interrupts_held_at_flush`` > 0: the host's pending call ran in
``_Py_FinishPendingCalls`` and kept the interrupt), a SystemError on the
child's stderr, the cleanup's own exception shown (KeyboardInterrupt on
stderr, or exit status 3 / ``SystemExit: 3``), every payload released.

The interpreter running this tool is the one measured, with its build of
``deferred_cleanup._native`` (a test build: the scenario needs the
``_test_release_at_exit_flush`` hook).  Run it through the matrix::

    python3 tools/matrix.py run cp310-pyenv -- sh -c '"$PY" tools/exit_flush_runs.py'

The result is merged into ``notes/exit-flush/runs.json`` under the
interpreter's matrix name (``DC_INTERPRETER_NAME``, else ``cpXY``), and the
file's provenance stamp (tools/provenance.py) is renewed.  Standard library
only.  Exit status 0 when no run showed a SystemError and every run met the
rule, 1 otherwise, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCENARIO = REPO / "tests" / "scenarios" / "exit_interrupt_at_flush.py"
OUT = REPO / "notes" / "exit-flush" / "runs.json"
#: The sources whose change makes the counts stale (provenance stamp).
GLOBS = [
    "reference/src/host.cpp",
    "reference/src/exit.cpp",
    "src/cpython/interrupt.cpp",  # the interrupt rule, shared by both hosts
    "src/cpython/interrupt.hpp",
    "reference/testing/test_hooks.cpp",
    "tests/scenarios/exit_interrupt_at_flush.py",
    "tools/exit_flush_runs.py",
]
PAYLOADS = 20
#: Seconds before one child is killed: a hang guard (a child exits in well under 1 s).
CHILD_TIMEOUT_S = 120.0


def run_once(kind: str, tmp: Path) -> dict:
    """Run one child of the scenario.

    Args:
        kind (str): ``"ki"`` or ``"exit"``.
        tmp (Path): directory for the child's counters file.

    Returns:
        dict: ``witness``, ``system_error``, ``exception_shown``,
        ``all_released`` (bool each), ``rc`` (int) and ``seconds`` (float,
        the child's wall time).

    Raises:
        subprocess.TimeoutExpired: the child hung past CHILD_TIMEOUT_S.
    """
    stats = tmp / "stats.json"
    if stats.exists():
        stats.unlink()
    env = dict(os.environ, DEFERRED_CLEANUP_VARIANT="reference", DC_STATS_AT_EXIT=str(stats))
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, str(SCENARIO), str(PAYLOADS), kind],
        env=env,
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    seconds = time.monotonic() - t0
    s = json.loads(stats.read_text()) if stats.exists() and stats.read_text().strip() else {}
    if kind == "ki":
        shown = "KeyboardInterrupt" in p.stderr
    else:
        shown = p.returncode == 3 or "SystemExit: 3" in p.stderr
    return {
        "witness": s.get("interrupts_held_at_flush", 0) > 0,
        "system_error": "SystemError" in p.stderr,
        "exception_shown": shown,
        "all_released": s.get("cleaned") == PAYLOADS and s.get("leaked_at_shutdown") == 0,
        "rc": p.returncode,
        "seconds": seconds,
        "stderr": p.stderr,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the scenario ``--runs`` times and merge the counts into ``--out``.

    Args:
        argv (list[str] | None): command-line arguments (default sys.argv[1:]).

    Returns:
        int: 0 when every run met the rule, 1 otherwise; argparse exits 2 on bad arguments.
    """
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100, help="children to run (default 100)")
    ap.add_argument("--out", type=Path, default=OUT, help="JSON file to merge into")
    ap.add_argument("--no-write", action="store_true", help="print the counts only")
    a = ap.parse_args(argv)
    if a.runs < 1:
        ap.error("--runs must be >= 1")
    name = os.environ.get("DC_INTERPRETER_NAME") or "cp{}{}".format(*sys.version_info[:2])
    counts = {
        "runs": 0,
        "witnesses": 0,
        "system_errors": 0,
        "exception_shown": 0,
        "all_released": 0,
    }
    first_bad = None
    longest = 0.0
    with tempfile.TemporaryDirectory() as td:
        for i in range(a.runs):
            r = run_once(("ki", "exit")[i % 2], Path(td))
            counts["runs"] += 1
            counts["witnesses"] += r["witness"]
            counts["system_errors"] += r["system_error"]
            counts["exception_shown"] += r["exception_shown"]
            counts["all_released"] += r["all_released"]
            longest = max(longest, r["seconds"])
            ok = r["witness"] and r["exception_shown"] and r["all_released"]
            if first_bad is None and (r["system_error"] or not ok):
                first_bad = {"run": i, "rc": r["rc"], "stderr": r["stderr"][-2000:]}
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    entry = {
        "version": platform.python_version(),
        "payloads": PAYLOADS,
        **counts,
        "longest_child_s": round(longest, 3),
        "load_1min_at_end": load,
        "first_failure": first_bad,
    }
    print(json.dumps({name: entry}, indent=1))
    if not a.no_write:
        sys.path.insert(0, str(REPO / "tools"))
        import provenance  # noqa: PLC0415 - tools/provenance.py

        data = json.loads(a.out.read_text()) if a.out.exists() else {}
        data.pop("provenance", None)
        data.setdefault("scenario", "tests/scenarios/exit_interrupt_at_flush.py")
        data.setdefault("interpreters", {})[name] = entry
        data["interpreters"] = dict(sorted(data["interpreters"].items()))
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(data, indent=1) + "\n")
        provenance.write_stamp(a.out, provenance.stamp(GLOBS))
    bad = counts["system_errors"] or first_bad is not None
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
