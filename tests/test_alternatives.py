# SPDX-License-Identifier: Apache-2.0
"""tools/alternatives.py: the handoffs side by side ("When to use what").

Two kinds of check:

* the committed data file, docs/_data/alternatives.json, which the docs page
  renders: its schema, its provenance stamp, and that this library's row
  released every payload of the burst on the main thread on every
  interpreter measured (plain pytest; reads a file);
* a small run of the tool itself on the running interpreter (marker
  ``bench``: once per ``make test``, in one interpreter's environment; it
  builds the tool's pybind11 extension with g++, about 20 s): the JSON it
  writes has the schema the page reads, and the ``core`` row released every
  payload on the main thread, in the burst and in every exit run, with a
  clean exit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import alternatives  # noqa: E402  (tools/alternatives.py)
import provenance  # noqa: E402  (tools/provenance.py)

DATA = REPO / "docs" / "_data" / "alternatives.json"
BURST_KEYS = {"status", "seconds", "released", "released_main", "callbacks", "timed_out"}
EXIT_KEYS = {"runs", "n", "statuses", "released_min", "released_max", "released_main_min"}


def _check_interpreter(r: dict, burst_n: int, exit_n: int, runs: int) -> None:
    """Schema of one interpreter's result, and the core row's promise."""
    assert set(r["handoffs"]) == set(alternatives.HANDOFFS), r["handoffs"].keys()
    for h, res in r["handoffs"].items():
        if "absent" in res:
            assert h == "guard" and r["python"] < "3.15", (h, res)
            assert res["absent"], "an absent handoff says why"
            continue
        assert BURST_KEYS <= set(res["burst"]), (h, res["burst"].keys())
        assert EXIT_KEYS <= set(res["exit"]), (h, res["exit"].keys())
        assert sum(res["exit"]["statuses"].values()) == runs, (h, res["exit"])
        assert res["exit"]["n"] == exit_n
    core = r["handoffs"]["core"]
    b, x = core["burst"], core["exit"]
    assert b["status"] == "rc 0" and not b["timed_out"], (r["name"], b)
    assert b["released"] == burst_n, (r["name"], b)
    assert b["released_main"] == burst_n, f"{r['name']}: core released off the main thread: {b}"
    assert b["callbacks_main"] == burst_n, (r["name"], b)
    assert x["statuses"] == {"rc 0": runs}, (r["name"], x)
    assert x["released_min"] == exit_n, f"{r['name']}: core lost payloads at exit: {x}"
    assert x["released_main_min"] == exit_n, (r["name"], x)


def test_committed_data_has_the_schema_and_the_core_row_holds():
    """The data the page renders: stamped, every interpreter measured or
    missing with a reason, and the core's row all on the main thread."""
    data = json.loads(DATA.read_text())
    stamp = provenance.read_stamp(DATA)
    assert stamp and stamp["globs"] == alternatives.GLOBS, stamp
    assert data["threads"] == alternatives.THREADS
    assert [i["name"] for i in data["interpreters"]], "no interpreter in the data"
    measured = [i for i in data["interpreters"] if "handoffs" in i]
    assert measured, data["interpreters"]
    for i in data["interpreters"]:
        if "handoffs" not in i:
            assert i.get("missing"), i
            continue
        _check_interpreter(i, data["burst_n"], data["exit_n"], data["exit_runs"])
    for which in ("burst", "exit"):
        head, rows = alternatives.table_rows(data, which)
        assert len(head) == 1 + len(data["interpreters"])
        assert [r[0] for r in rows] == [alternatives.LABELS[h] for h in alternatives.HANDOFFS]


@pytest.mark.bench
@pytest.mark.timeout(600)
def test_small_run_of_the_tool(tmp_path):
    """The tool on this interpreter, small sizes: it builds, every handoff
    reports, and the core releases everything on the main thread."""
    pytest.importorskip("pybind11", reason="the tool builds its extension with pybind11")
    out = tmp_path / "r.json"
    p = subprocess.run(
        [
            sys.executable,
            str(REPO / "tools" / "alternatives.py"),
            "measure",
            "--name",
            "pytest",
            "--burst",
            "2000",
            "--exit-runs",
            "2",
            "--exit-n",
            "500",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=540,  # hang guard: a few seconds per child here, 30 s for the build
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    r = json.loads(out.read_text())
    _check_interpreter(r, 2000, 500, 2)
    data = {"burst_n": 2000, "exit_n": 500, "interpreters": [r]}
    for which in ("burst", "exit"):
        _, rows = alternatives.table_rows(data, which)
        assert all(len(row) == 2 for row in rows), rows
