# SPDX-License-Identifier: Apache-2.0
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
import warnings
from pathlib import Path

import pytest

from deferred_cleanup import cpython_facts, report

PROBE_TIMEOUT_S = 100  # the probe takes ~6 s; pyproject's pytest timeout is 120 s
VERSION = sys.version_info[:2]


def probe_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m deferred_cleanup.probe ARGS`` in a child; return the finished process."""
    return subprocess.run(
        [sys.executable, "-m", "deferred_cleanup.probe", *args],
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
        env=env,
    )


def run_probe(tmp: Path, *extra: str, ok_rcs=(0,)) -> tuple[dict, str, int]:
    """Run the probe CLI in a child; return (JSON result, stdout, exit status)."""
    out = tmp / "probe.json"
    p = probe_cli("--json", str(out), *extra)
    assert p.returncode in ok_rcs, f"probe failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    return json.loads(out.read_text()), p.stdout, p.returncode


@pytest.fixture(scope="module")
def probe_run(tmp_path_factory) -> tuple[dict, str, int]:
    # --check exits 1 on a difference: the per-field tests below then say which.
    return run_probe(tmp_path_factory.mktemp("probe"), "--no-burst", "--check", ok_rcs=(0, 1))


@pytest.fixture(scope="module")
def measured(probe_run) -> dict:
    return probe_run[0]


# ---------------------------------------------------------------- one test per field
#: A version newer than the table (e.g. CPython's main branch) is compared with
#: the newest row; a difference there is news, reported as a warning, and fails
#: only with DC_PROBE_STRICT=1 (as ``probe --check --strict``).
STRICT = os.environ.get("DC_PROBE_STRICT") == "1"


class NewerCPythonNews(UserWarning):
    """A field of a CPython newer than the table differs from the newest row."""


@pytest.mark.parametrize("field", cpython_facts.FIELDS)
def test_field_matches_expected_table(measured, field):
    exp, newer = cpython_facts.assumed(field, VERSION)
    assert field in measured["fields"], f"the probe did not measure {field}"
    got = measured["fields"][field]
    # Compare types too: True == 1 in Python, but a bool field must not pass as an int.
    if (type(got), got) == (type(exp), exp):
        return
    if newer and not STRICT:
        n = cpython_facts.newest()
        warnings.warn(
            NewerCPythonNews(
                f"newer than the table: {platform.python_version()} {field} measured {got!r}, "
                f"{exp!r} on {n[0]}.{n[1]} (DC_PROBE_STRICT=1 makes this fail)"
            ),
            stacklevel=1,
        )
        return
    row = cpython_facts.fact(field, cpython_facts.newest() if newer else VERSION)
    raise AssertionError(
        f"CPython behaviour changed: {platform.python_version()} {field} expected {exp!r}, "
        f"measured {got!r}\n"
        f"expected row cites: {row.cite}\nraw: {measured['extra'].get(field) or measured['extra']}"
    )


def test_probe_measures_no_field_outside_the_table(measured):
    assert sorted(set(measured["fields"]) - set(cpython_facts.FIELDS)) == []


# ---------------------------------------------------------------- CLI and metadata
# What a user who names nothing should see: CPython's own ABI letters
# (sys.abiflags: "t" free-threaded, "d" debug) and the interpreter binary.
DERIVED_NAME = f"cp{sys.version_info[0]}{sys.version_info[1]}{sys.abiflags}-custom"
DERIVED_SOURCE = "path:" + os.path.realpath(sys.executable)


def test_probe_table_and_metadata(probe_run):
    result, stdout, _ = probe_run
    md = result["interpreter"]
    assert md["version"] == platform.python_version()
    assert md["debug"] == hasattr(sys, "gettotalrefcount")
    assert md["gil_disabled"] == bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    assert md["name"] == (os.environ.get("DC_INTERPRETER_NAME") or DERIVED_NAME)
    assert md["source"] == (os.environ.get("DC_INTERPRETER_SOURCE") or DERIVED_SOURCE)
    lines = stdout.splitlines()
    for field in cpython_facts.FIELDS:
        assert any(line.split()[:1] == [field] for line in lines), (
            f"{field} missing from the printed table"
        )


def test_name_and_source_are_derived_when_no_variable_gives_them():
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DC_INTERPRETER_NAME", "DC_INTERPRETER_SOURCE")
    }
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json; from deferred_cleanup import probe; "
            "print(json.dumps(probe.interpreter_metadata()))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert p.returncode == 0, p.stderr
    md = json.loads(p.stdout)
    assert (md["name"], md["source"]) == (DERIVED_NAME, DERIVED_SOURCE)
    assert "unknown" not in (md["name"], md["source"])


def test_raw_timings_are_kept_apart(measured):
    # Timings are extra data: a compared field never holds a float.
    assert not [f for f, v in measured["fields"].items() if isinstance(v, float)]
    assert measured["extra"]["delay.sleep"]["delay_ms"] is not None


def test_fork_probe_runs_the_queued_calls_in_both_processes(measured):
    # fork.queued_calls_in_child says what the child did with the calls a
    # foreign thread queued just before fork(); the parent keeps its own copies
    # and runs them too (a fork must not take them from the parent), and the
    # child exited normally (a crash would read as "child-failed").
    from deferred_cleanup import probe

    fork = measured["extra"]["fork"]
    assert fork["queued"] == probe.FORK_QUEUED
    assert fork["child_status"] == 0, fork
    assert fork["parent_ran"] == fork["queued"], fork
    # The field is derived from the child's count, not from anything else.
    ran_all = fork["child_ran"] == fork["queued"]
    assert ran_all == (measured["fields"]["fork.queued_calls_in_child"] == "run"), fork


def test_exit_flush_probe_runs_its_call_in_the_flush_with_no_frame(measured):
    # exit_flush.error is about the flush only: the child's failing pending
    # call was added once (accepted) and ran once, with no Python frame (the
    # C wrapper of threading._shutdown leaves no bytecode before the flush),
    # and the child's stderr holds the call's own exception, chained or not.
    child = measured["extra"]["exit-flush"]
    lines = child["lines"]
    assert "flush:add:0" in lines, child
    assert lines.count("flush:ran:0") == 1 and "flush:ran:1" not in lines, child
    assert any("probe: pending call failed" in ln for ln in lines if ln.startswith("stderr:")), (
        child
    )
    assert measured["fields"]["exit_flush.error"] in ("SystemError", "exception", "silent"), child


# ---------------------------------------------------------------- the expected table
def test_expected_interface():
    if VERSION > NEWEST:
        with pytest.raises(KeyError):  # no row covers a version newer than the table
            cpython_facts.expected("capacity")
        assert cpython_facts.assumed("capacity") == (
            cpython_facts.expected("capacity", NEWEST),
            True,
        )
    else:
        assert cpython_facts.expected("capacity") == cpython_facts.expected("capacity", VERSION)
        assert cpython_facts.assumed("capacity") == (
            cpython_facts.expected("capacity", VERSION),
            False,
        )
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
    assert "Python/" in row.cite or "Include/" in row.cite or row.cite.startswith("see "), row.cite


# ---------------------------------------------------------------- the report
def run_report(tmp: Path, files: list[Path], *missing: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "deferred_cleanup.report",
            "--out-dir",
            str(tmp / "out"),
            *[f"--missing={m}" for m in missing],
            *map(str, files),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_report_no_difference_on_this_interpreter(measured, tmp_path):
    f = tmp_path / "here.json"
    f.write_text(json.dumps(measured))
    p = run_report(tmp_path, [f], "cp399-nowhere: not installed here")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "CPython behaviour changed" not in p.stdout
    assert any(line.startswith("free-threaded: ") for line in p.stdout.splitlines())
    header = p.stdout.splitlines()[0].split()
    assert header[-1] == "cp399-nowhere" and "MISSING" in p.stdout
    assert (tmp_path / "out" / "probe.md").read_text().count("| capacity |") == 1
    saved = json.loads((tmp_path / "out" / "probe.json").read_text())
    assert saved["differences"] == [] and saved["missing"][0]["name"] == "cp399-nowhere"


def test_report_flags_a_changed_value(in_table, tmp_path):
    changed = json.loads(json.dumps(in_table))
    changed["fields"]["capacity"] = in_table["fields"]["capacity"] + 1
    f = tmp_path / "changed.json"
    f.write_text(json.dumps(changed))
    p = run_report(tmp_path, [f])
    assert p.returncode == 1
    want = (
        f"CPython behaviour changed: {in_table['interpreter']['version']} capacity expected "
        f"{in_table['fields']['capacity']}, measured {in_table['fields']['capacity'] + 1}"
    )
    assert want in p.stdout


def test_report_says_when_reference_burst_is_absent(measured, tmp_path):
    f = tmp_path / "here.json"
    f.write_text(json.dumps(measured))  # recorded with --no-burst
    p = run_report(tmp_path, [f])
    assert "reference burst" in p.stdout and "not available" in p.stdout


def test_probe_records_reference_burst(tmp_path):
    result, _, _ = run_probe(tmp_path)
    rb = result["reference_burst"]
    assert rb.get("available"), rb
    for key in ("payloads", "cleaned", "pending_calls", "drain_cycles", "delay_ms"):
        assert key in rb, key
    line = report.burst_line(result)
    assert f"payloads={rb['payloads']}" in line


# ---------------------------------------------------------------- probe --check
NEWEST = max(r.hi for r in cpython_facts.TABLE)  # the newest version the table has rows for
NEWEST_S = f"{NEWEST[0]}.{NEWEST[1]}"


def write_json(path: Path, result: dict) -> Path:
    path.write_text(json.dumps(result))
    return path


def changed_capacity(result: dict) -> dict:
    """A deep copy of ``result`` whose ``capacity`` is one more than measured."""
    out = json.loads(json.dumps(result))
    out["fields"]["capacity"] = result["fields"]["capacity"] + 1
    return out


@pytest.fixture
def fake_version(measured):
    """Factory: this interpreter's measurements, relabelled as CPython ``X.Y.0a1``.

    ``fake_version(minor)`` returns a copy of the measured JSON whose version is
    ``3.<minor>.0a1`` (the fields are this interpreter's); the probe's
    ``--load`` then treats it as a run of that version.
    """

    def make(minor: int) -> dict:
        out = json.loads(json.dumps(measured))
        out["interpreter"]["version"] = f"3.{minor}.0a1"
        out["interpreter"]["version_info"] = [3, minor, 0]
        out["interpreter"]["name"] = f"cp3{minor}-custom"
        return out

    return make


def test_check_exits_0_on_this_interpreter(probe_run):
    _, stdout, rc = probe_run
    assert rc == 0, stdout
    assert "CPython behaviour changed" not in stdout
    if VERSION > NEWEST:
        # A version newer than the table: no difference, or news that does not fail.
        assert (
            f"check: no difference from the expected table for {NEWEST_S}" in stdout
            or f"the newest row, on CPython {platform.python_version()}: exit 0" in stdout
        ), stdout
    else:
        assert (
            f"check: no difference from the expected table for {VERSION[0]}.{VERSION[1]}" in stdout
        )


@pytest.fixture
def in_table(measured, fake_version) -> dict:
    """This interpreter's measurements; on a version newer than the table, a run
    labelled as the newest row's version whose fields are that row's values
    (the --check tests below are about versions the table covers)."""
    if VERSION <= NEWEST:
        return measured
    out = fake_version(NEWEST[1])
    out["fields"] = {f: cpython_facts.expected(f, NEWEST) for f in cpython_facts.FIELDS}
    return out


def test_check_exits_1_when_a_field_changes(in_table, tmp_path):
    f = write_json(tmp_path / "changed.json", changed_capacity(in_table))
    p = probe_cli("--load", str(f), "--check")
    assert p.returncode == 1, p.stdout + p.stderr
    cap = in_table["fields"]["capacity"]
    ver = in_table["interpreter"]["version"]
    want = f"CPython behaviour changed: {ver} capacity expected {cap}, measured {cap + 1}"
    assert want in p.stdout.splitlines()
    assert "check: 1 difference(s) from the expected table" in p.stdout


def test_check_exits_1_when_a_field_is_not_measured(in_table, tmp_path):
    gone = json.loads(json.dumps(in_table))
    del gone["fields"]["delay.busy_python"]
    p = probe_cli("--load", str(write_json(tmp_path / "gone.json", gone)), "--check")
    assert p.returncode == 1, p.stdout + p.stderr
    ver = tuple(in_table["interpreter"]["version_info"][:2])
    assert (
        "delay.busy_python expected "
        f"{report.fmt(cpython_facts.expected('delay.busy_python', ver))}, "
        f"measured <not measured>" in p.stdout
    )


def test_check_exits_1_when_a_field_changes_type(in_table, tmp_path):
    """The same digits as a string (31 -> "31") are a change of CPython's
    behaviour (the probe recorded a different kind of value), reported by name."""
    typed = json.loads(json.dumps(in_table))
    cap = typed["fields"]["capacity"]
    typed["fields"]["capacity"] = str(cap)
    p = probe_cli("--load", str(write_json(tmp_path / "typed.json", typed)), "--check")
    assert p.returncode == 1, p.stdout + p.stderr
    ver = in_table["interpreter"]["version"]
    assert (
        f"CPython behaviour changed: {ver} capacity expected {report.fmt(cap)}, measured "
        f"{report.fmt(str(cap))}" in p.stdout.splitlines()
    ), p.stdout
    assert "check: 1 difference(s) from the expected table" in p.stdout


def test_check_exits_1_when_a_measured_field_has_no_row(in_table, tmp_path):
    """A field the probe measured but the expected table has no row for is a
    difference too (report.differences' docstring): a new probe field cannot
    pass unreviewed."""
    extra = json.loads(json.dumps(in_table))
    extra["fields"]["made_up.field"] = 1
    p = probe_cli("--load", str(write_json(tmp_path / "extra.json", extra)), "--check")
    assert p.returncode == 1, p.stdout + p.stderr
    ver = in_table["interpreter"]["version"]
    assert (
        f"CPython behaviour changed: {ver} made_up.field expected {report.fmt(report.NO_ROW)}, "
        f"measured 1" in p.stdout.splitlines()
    ), p.stdout


def test_check_without_check_flag_exits_0_on_a_difference(measured, tmp_path):
    # Measuring (or printing a saved run) is not checking: exit 0, no verdict.
    p = probe_cli("--load", str(write_json(tmp_path / "changed.json", changed_capacity(measured))))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "check:" not in p.stdout


def test_check_newer_than_the_table_compares_with_the_newest_row(fake_version, tmp_path):
    newer = fake_version(NEWEST[1] + 1)
    newer["fields"]["capacity"] = (
        cpython_facts.expected("capacity", NEWEST) + 1
    )  # one sure difference
    f = write_json(tmp_path / "newer.json", newer)
    p = probe_cli("--load", str(f), "--check")
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    heads = [line for line in lines if line.startswith("newer than the table:")]
    assert len(heads) == 1 and heads[0].startswith(
        f"newer than the table: differences from {NEWEST_S} "
    )
    cap = cpython_facts.expected("capacity", NEWEST)
    assert f"  capacity expected {cap} (as on {NEWEST_S}), measured {cap + 1}" in lines
    # Every other line is a field whose value differs from the newest row, and no more.
    want = {
        f
        for f in cpython_facts.FIELDS
        if (type(newer["fields"][f]), newer["fields"][f])
        != (type(cpython_facts.expected(f, NEWEST)), cpython_facts.expected(f, NEWEST))
    }
    got = {line.split()[0] for line in lines if line.startswith("  ")}
    assert got == want
    assert "CPython behaviour changed" not in p.stdout and "<no expected row>" not in p.stdout
    strict = probe_cli("--load", str(f), "--check", "--strict")
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert heads[0] in strict.stdout.splitlines()


def test_check_newer_than_the_table_without_difference_exits_0_even_strict(fake_version, tmp_path):
    newer = fake_version(NEWEST[1] + 1)
    newer["fields"] = {f: cpython_facts.expected(f, NEWEST) for f in cpython_facts.FIELDS}
    f = write_json(tmp_path / "newer-same.json", newer)
    p = probe_cli("--load", str(f), "--check", "--strict")
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"check: no difference from the expected table for {NEWEST_S}" in p.stdout


def test_report_newer_than_the_table_is_news_not_failure(fake_version, measured, tmp_path):
    here = write_json(tmp_path / "here.json", measured)
    newer = fake_version(NEWEST[1] + 1)
    newer["fields"]["capacity"] = cpython_facts.expected("capacity", NEWEST) + 1
    f = write_json(tmp_path / "newer.json", newer)
    p = run_report(tmp_path, [here, f])
    assert p.returncode == 0, p.stdout + p.stderr
    assert (
        f"newer than the table: differences from {NEWEST_S} (cp3{NEWEST[1] + 1}-custom" in p.stdout
    )
    assert "CPython behaviour changed" not in p.stdout
    saved = json.loads((tmp_path / "out" / "probe.json").read_text())
    assert {
        (d["field"], d["compared_with"], d["newer_than_table"]) for d in saved["differences"]
    } >= {("capacity", NEWEST_S, True)}
    strict = subprocess.run(
        [
            sys.executable,
            "-m",
            "deferred_cleanup.report",
            "--strict",
            "--out-dir",
            str(tmp_path / "out2"),
            str(here),
            str(f),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert strict.returncode == 1, strict.stdout + strict.stderr


def test_help_says_time_crashes_and_exit_codes():
    p = probe_cli("--help")
    assert p.returncode == 0
    text = " ".join(p.stdout.split())
    assert "about 5 s" in text
    assert "crashes ON PURPOSE with SIGSEGV" in text
    for status in ("0 measured", "1 --check found a difference", "2 bad arguments"):
        assert status in text, status


# ---------------------------------------------------------------- the free-threaded line
def test_free_threaded_line_is_derived_from_the_measured_interpreters(measured, tmp_path):
    here = write_json(tmp_path / "here.json", measured)
    name = measured["interpreter"]["name"]
    p = run_report(tmp_path, [here])
    line = next(line for line in p.stdout.splitlines() if line.startswith("free-threaded:"))
    if measured["interpreter"]["gil_disabled"]:
        assert line == f"free-threaded: measured on {name}"
    else:
        assert line == (
            "free-threaded: not available (no Py_GIL_DISABLED build among the 1 "
            "interpreter(s) measured)"
        )
    # An interpreter that reported Py_GIL_DISABLED=1 changes the line; this one,
    # when it is free-threaded itself, stays on it first.
    ft = json.loads(json.dumps(measured))
    ft["interpreter"].update(gil_disabled=True, name="cp399t-elsewhere")
    p2 = run_report(tmp_path, [here, write_json(tmp_path / "ft.json", ft)])
    want = (
        "measured on "
        + (f"{name}, " if measured["interpreter"]["gil_disabled"] else "")
        + "cp399t-elsewhere"
    )
    assert f"free-threaded: {want}" in p2.stdout.splitlines()
    saved = json.loads((tmp_path / "out" / "probe.json").read_text())
    assert saved["free_threaded"] == want


def test_free_threaded_line_names_the_runs_measured_outside_ci(measured, tmp_path):
    here = write_json(tmp_path / "here.json", measured)
    runs = tmp_path / "interpreters"
    runs.mkdir()

    def line(p: subprocess.CompletedProcess) -> str:
        return next(x for x in p.stdout.splitlines() if x.startswith("free-threaded:"))

    def report_with_runs() -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "deferred_cleanup.report",
                "--out-dir",
                str(tmp_path / "o"),
                f"--outside-ci={runs}",
                str(here),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert line(report_with_runs()).endswith(
        f"; none measured outside CI ({runs} has no free-threaded run)"
    )
    ft = json.loads(json.dumps(measured))
    ft["interpreter"].update(gil_disabled=True, name="cp399t-elsewhere", version="3.99.0a0")
    write_json(runs / "cp399t.json", {"probe": ft, "suite": {"passed": 1}})
    assert line(report_with_runs()).endswith(
        f"; measured outside CI: cp399t-elsewhere 3.99.0a0 ({runs})"
    )
