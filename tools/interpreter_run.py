#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Save one interpreter's probe and suite results, measured outside CI, as data.

The docs' versions page renders every ``notes/interpreters/*.json`` under
"measured here, outside CI", and ``make probe``'s free-threaded line names
the free-threaded ones.  Usage::

    tools/interpreter_run.py save TAG --probe PROBE.json --junit SUITE.xml \\
        --configure "--disable-gil" --source "python/cpython main at <commit>" \\
        [--note TEXT] [--gil-env PYTHON_GIL=0]

writes ``notes/interpreters/TAG.json``::

    {"tag", "cpython": {"version", "configure", "source"}, "env",
     "probe": <the probe's JSON>, "suite": {"passed", "failed", "skipped",
     "failures": [test ids]}, "note", "provenance": <tools/provenance.py stamp>}

Standard library only.  It records results; it builds nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import provenance  # noqa: E402  (tools/provenance.py)

OUT = REPO / "notes" / "interpreters"
#: What the probe and the suite measured: the package, its C++ and the tests.
GLOBS = [
    *provenance.PACKAGE_GLOBS,
    "tests/*.py",
    "tests/scenarios/*.py",
]


def suite(junit: Path) -> dict:
    """Counts and failing test ids of one pytest JUnit XML file.

    :param junit: the XML that tools/matrix.py test wrote (Path).
    :returns: dict ``passed``, ``failed``, ``skipped`` (int) and ``failures`` (list[str]).
    """
    root = ET.parse(junit).getroot()
    cases = list(root.iter("testcase"))
    failures, skipped = [], 0
    for c in cases:
        if c.find("failure") is not None or c.find("error") is not None:
            failures.append(f"{c.get('classname', '')}::{c.get('name', '')}")
        elif c.find("skipped") is not None:
            skipped += 1
    return {
        "passed": len(cases) - len(failures) - skipped,
        "failed": len(failures),
        "skipped": skipped,
        "failures": failures,
    }


def main(argv: list[str]) -> int:
    """Command line; see the module docstring.

    :param argv: arguments (list[str]).
    :returns: 0.  Raises OSError / ValueError on unreadable inputs.
    """
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save")
    s.add_argument("tag")
    s.add_argument("--probe", type=Path, required=True)
    s.add_argument("--junit", type=Path, required=True)
    s.add_argument("--configure", required=True)
    s.add_argument("--source", required=True)
    s.add_argument("--env", default="")
    s.add_argument("--note", default="")
    a = ap.parse_args(argv)
    probe = json.loads(a.probe.read_text())
    out = {
        "tag": a.tag,
        "cpython": {
            "version": probe["interpreter"]["version"],
            "configure": a.configure,
            "source": a.source,
        },
        "env": a.env,
        "probe": probe,
        "suite": suite(a.junit),
        "note": a.note,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    dest = OUT / f"{a.tag}.json"
    dest.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    subprocess.run(
        [
            sys.executable,
            str(REPO / "tools" / "provenance.py"),
            "stamp",
            str(dest),
            *[x for g in GLOBS for x in ("--glob", g)],
        ],
        check=True,
    )
    print(
        f"{dest.relative_to(REPO)}: {out['suite']['passed']} passed, {out['suite']['failed']} "
        "failed"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
