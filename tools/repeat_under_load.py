#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Run the per-interpreter suite several times while every core is kept busy.

Flaky tests hide on an idle machine.  This script starts one busy process per
core (plain spinning Python processes, so the load is the same on any machine),
then runs ``tools/matrix.py test --no-once`` (the per-interpreter suite on
every interpreter, or those named by ``--only``) ``--runs`` times, and records
for each run and interpreter the passed, failed and skipped counts, whether
the pytest session aborted, and the names of the failing tests (from the
JUnit XML and session report the matrix writes to build/test/).

Writes ``--out`` (default build/repeat/repeat.json) and a Markdown table next
to it (repeat.md), both stamped with the commit and a hash of the sources
they tested (tools/provenance.py).  Exit status 1 when any run failed.

Usage:
  tools/repeat_under_load.py [--runs N] [--load K] [--only cp312-pyenv,...] [--out FILE]

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import provenance  # noqa: E402
from matrix import session_aborted  # noqa: E402

# What the suite exercises: the core, the extension, the tests themselves.
# Without reference/src/*.hpp: the committed stamp's globs never had it (they are
# compared with these); it joins with the next run.
GLOBS = [
    *provenance.package_globs(without=("reference/src/*.hpp",)),
    "tests/*.py",
    "tests/scenarios/*.py",
]


def _spin() -> None:
    while True:
        pass


def _failures(xml: Path) -> tuple[int, int, int, list[str]]:
    """(passed, failed, skipped, failing test ids) from one JUnit XML file."""
    if not xml.exists():
        return 0, 0, 0, []
    passed = failed = skipped = 0
    names = []
    for case in ET.parse(xml).getroot().iter("testcase"):
        tags = {child.tag for child in case}
        if tags & {"failure", "error"}:
            failed += 1
            names.append(f"{case.get('classname')}::{case.get('name')}")
        elif "skipped" in tags:
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped, names


def write_report(out_path: Path, runs: list, load_processes: int, st: dict) -> str:
    """Write the JSON and Markdown reports of the runs so far; return the Markdown."""
    load = os.getloadavg()
    out = {
        "runs": runs,
        "load_processes": load_processes,
        "cpus": os.cpu_count(),
        "loadavg_end": load,
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(out, indent=1) + "\n")
    provenance.write_stamp(out_path, st)
    envs = sorted({e for r in runs for e in r["envs"]})
    lines = [
        f"Per-interpreter suite, {len(runs)} runs, {load_processes} busy processes on "
        f"{os.cpu_count()} cores; commit {st['commit'][:12]}"
        f"{' (dirty)' if st['dirty'] else ''}.",
        "",
        "| interpreter | " + " | ".join(f"run {r['run']}" for r in runs) + " |",
        "|---|" + "---|" * len(runs),
    ]
    for e in envs:
        cells = []
        for r in runs:
            x = r["envs"].get(e)
            cells.append(
                "not run"
                if x is None
                else f"{x['passed']} passed, {x['failed']} failed"
                + (" (aborted)" if x["aborted"] else "")
            )
        lines.append(f"| {e} | " + " | ".join(cells) + " |")
    lines.append(
        "| seconds, load average at the end | "
        + " | ".join(f"{r['seconds']}, {r['loadavg_1min_at_end']:.1f}" for r in runs)
        + " |"
    )
    for r in runs:
        for e, x in r["envs"].items():
            for n in x["failing"]:
                lines.append(f"\nrun {r['run']}, {e}: FAILED {n}")
    md = "\n".join(lines) + "\n"
    out_path.with_suffix(".md").write_text(md)
    return md


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="how many runs of the suite (default 5)")
    ap.add_argument(
        "--load",
        type=int,
        default=os.cpu_count() or 1,
        help="busy processes kept running meanwhile (default: one per core)",
    )
    ap.add_argument("--only", help="comma-separated matrix names (default: every interpreter)")
    ap.add_argument("--out", type=Path, default=REPO / "build" / "repeat" / "repeat.json")
    a = ap.parse_args(argv)

    st = provenance.stamp(GLOBS)
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(a.load)]
    for p in spinners:
        p.start()
    runs = []
    try:
        for i in range(1, a.runs + 1):
            cmd = [sys.executable, str(REPO / "tools" / "matrix.py"), "test", "--no-once"]
            if a.only:
                cmd += ["--only", a.only]
            print(f"[repeat] run {i} of {a.runs}, {a.load} busy processes: {' '.join(cmd)}")
            for old in (REPO / "build" / "test").glob("cp*"):
                old.unlink()  # no result of an earlier run is read as this run's
            t0 = time.monotonic()
            rc = subprocess.run(cmd, cwd=REPO).returncode
            rows = {}
            for xml in sorted((REPO / "build" / "test").glob("cp*.xml")):
                env = xml.stem
                p, f, s, names = _failures(xml)
                report = xml.with_suffix(".session.json")
                # exit status 1 with every test run is a test failure, counted above
                aborted = session_aborted(report, 1 if f else 0, p + f + s) or None
                rows[env] = {
                    "passed": p,
                    "failed": f,
                    "skipped": s,
                    "failing": names,
                    "aborted": aborted,
                }
            runs.append(
                {
                    "run": i,
                    "rc": rc,
                    "seconds": round(time.monotonic() - t0),
                    "loadavg_1min_at_end": os.getloadavg()[0],
                    "envs": rows,
                }
            )
            print(f"[repeat] run {i}: exit {rc}, {runs[-1]['seconds']} s")
            write_report(a.out, runs, a.load, st)  # kept if a later run is stopped
    finally:
        for p in spinners:
            p.terminate()
    print(write_report(a.out, runs, a.load, st))
    return 0 if all(r["rc"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
