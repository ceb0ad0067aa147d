"""The pending-call probe against the expected-facts table, one test per field.

The measured value of every field comes from running the probe
(``python -m deferred_cleanup.probe --json``) on this interpreter in a child
process; the expected value comes from ``deferred_cleanup.cpython_facts``,
which is read from CPython's sources and cited row by row.  A test fails when
CPython's behaviour differs from the table.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import deferred_cleanup
from deferred_cleanup import cpython_facts, report

PROBE_TIMEOUT_S = 100  # the probe takes ~6 s; pyproject's pytest timeout is 120 s
VERSION = sys.version_info[:2]


def run_probe(tmp: Path, *extra: str) -> tuple[dict, str]:
    """Run the probe CLI in a child; return (JSON result, stdout)."""
    out = tmp / "probe.json"
    p = subprocess.run([sys.executable, "-m", "deferred_cleanup.probe", "--json", str(out), *extra],
                       capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    assert p.returncode == 0, f"probe failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    return json.loads(out.read_text()), p.stdout


@pytest.fixture(scope="module")
def probe_run(tmp_path_factory) -> tuple[dict, str]:
    return run_probe(tmp_path_factory.mktemp("probe"), "--no-burst")


@pytest.fixture(scope="module")
def measured(probe_run) -> dict:
    return probe_run[0]


# ---------------------------------------------------------------- one test per field
@pytest.mark.parametrize("field", cpython_facts.FIELDS)
def test_field_matches_expected_table(measured, field):
    exp = cpython_facts.expected(field, VERSION)
    assert field in measured["fields"], f"the probe did not measure {field}"
    got = measured["fields"][field]
    row = cpython_facts.fact(field, VERSION)
    # Compare types too: True == 1 in Python, but a bool field must not pass as an int.
    assert (type(got), got) == (type(exp), exp), (
        f"CPython behaviour changed: {platform.python_version()} {field} expected {exp!r}, measured {got!r}\n"
        f"expected row cites: {row.cite}\nraw: {measured['extra'].get(field) or measured['extra']}")


def test_probe_measures_no_field_outside_the_table(measured):
    assert sorted(set(measured["fields"]) - set(cpython_facts.FIELDS)) == []


# ---------------------------------------------------------------- CLI and metadata
def test_probe_table_and_metadata(probe_run):
    result, stdout = probe_run
    md = result["interpreter"]
    assert md["version"] == platform.python_version()
    assert md["debug"] == hasattr(sys, "gettotalrefcount")
    assert md["gil_disabled"] == bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    assert md["name"] == os.environ.get("DC_INTERPRETER_NAME", "unknown")
    assert md["source"] == os.environ.get("DC_INTERPRETER_SOURCE", "unknown")
    lines = stdout.splitlines()
    for field in cpython_facts.FIELDS:
        assert any(line.split()[:1] == [field] for line in lines), f"{field} missing from the printed table"


def test_raw_timings_are_kept_apart(measured):
    # Timings are extra data: a compared field never holds a float.
    assert not [f for f, v in measured["fields"].items() if isinstance(v, float)]
    assert measured["extra"]["delay.sleep"]["delay_ms"] is not None


# ---------------------------------------------------------------- the expected table
def test_expected_interface():
    assert cpython_facts.expected("capacity") == cpython_facts.expected("capacity", VERSION)
    with pytest.raises(KeyError):
        cpython_facts.expected("no.such.field")
    with pytest.raises(KeyError):
        cpython_facts.expected("capacity", (3, 9))


@pytest.mark.parametrize("field", cpython_facts.FIELDS)
def test_every_field_covers_every_matrix_version_once(field):
    for minor in range(10, 16):
        hits = [r for r in cpython_facts.rows(field) if r.lo <= (3, minor) <= r.hi]
        assert len(hits) == 1, f"{field}: {len(hits)} rows cover 3.{minor}"


@pytest.mark.parametrize("row", cpython_facts.TABLE, ids=lambda r: f"{r.field}-{r.lo[1]}-{r.hi[1]}")
def test_every_row_is_cited(row):
    # A citation names a CPython source file, or refers to another row that does.
    assert ("Python/" in row.cite or "Include/" in row.cite or row.cite.startswith("see ")), row.cite


# ---------------------------------------------------------------- the report
def run_report(tmp: Path, files: list[Path], *missing: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "deferred_cleanup.report", "--out-dir", str(tmp / "out"),
                           *[f"--missing={m}" for m in missing], *map(str, files)],
                          capture_output=True, text=True, timeout=60)


def test_report_no_difference_on_this_interpreter(measured, tmp_path):
    f = tmp_path / "here.json"
    f.write_text(json.dumps(measured))
    p = run_report(tmp_path, [f], "cp399-nowhere: not installed here")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "CPython behaviour changed" not in p.stdout
    assert "free-threaded: not available" in p.stdout
    header = p.stdout.splitlines()[0].split()
    assert header[-1] == "cp399-nowhere" and "MISSING" in p.stdout
    assert (tmp_path / "out" / "probe.md").read_text().count("| capacity |") == 1
    saved = json.loads((tmp_path / "out" / "probe.json").read_text())
    assert saved["differences"] == [] and saved["missing"][0]["name"] == "cp399-nowhere"


def test_report_flags_a_changed_value(measured, tmp_path):
    changed = json.loads(json.dumps(measured))
    changed["fields"]["capacity"] = measured["fields"]["capacity"] + 1
    f = tmp_path / "changed.json"
    f.write_text(json.dumps(changed))
    p = run_report(tmp_path, [f])
    assert p.returncode == 1
    want = (f"CPython behaviour changed: {platform.python_version()} capacity expected "
            f"{measured['fields']['capacity']}, measured {measured['fields']['capacity'] + 1}")
    assert want in p.stdout


def test_report_says_when_reference_burst_is_absent(measured, tmp_path):
    f = tmp_path / "here.json"
    f.write_text(json.dumps(measured))  # recorded with --no-burst
    p = run_report(tmp_path, [f])
    assert "reference burst" in p.stdout and "not available" in p.stdout


def test_probe_records_reference_burst(tmp_path):
    result, _ = run_probe(tmp_path)
    rb = result["reference_burst"]
    assert rb.get("available"), rb
    for key in ("payloads", "cleaned", "pending_calls", "drain_cycles", "delay_ms"):
        assert key in rb, key
    line = report.burst_line(result)
    assert f"payloads={rb['payloads']}" in line
