# SPDX-License-Identifier: Apache-2.0
"""First use: what a plain ``pytest`` in a checkout runs, and the one-interpreter matrix.

Plain ``pytest`` (after ``pip install .[test]``) must not build the docs site,
install packages with apt, or need the Debian unstable root: the tests marked
``docs``, ``tools``, ``hardware`` and ``soak`` skip with a reason unless ``DC_MATRIX=1``, which
``tools/matrix.py`` sets for the jobs it runs (tests/conftest.py).

``tools/matrix.py --python PATH`` (``make test PYTHON=PATH``) tests exactly the
interpreter at PATH; its name and source are derived when no environment
variable gives them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_S = 120


def pytest_child(*args: str, matrix: bool) -> subprocess.CompletedProcess:
    """Run ``python -m pytest ARGS`` in the checkout, with or without ``DC_MATRIX=1``."""
    env = {k: v for k, v in os.environ.items() if k != "DC_MATRIX"}
    if matrix:
        env["DC_MATRIX"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def counts(stdout: str) -> dict[str, int]:
    """The final ``N passed, M skipped`` line of a pytest run as a dict."""
    last = stdout.strip().splitlines()[-1]
    return {
        word: int(n)
        for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", last)
    }


def test_plain_pytest_skips_the_docs_tests_with_a_reason():
    p = pytest_child("tests/test_docs.py", matrix=False)
    assert p.returncode == 0, p.stdout + p.stderr
    c = counts(p.stdout)
    assert c.get("passed", 0) == 0 and c.get("failed", 0) == 0 and c["skipped"] >= 10, p.stdout
    assert "marker 'docs' builds the docs site with tools/docs.sh" in p.stdout


def test_plain_pytest_skips_a_tools_test_that_dc_matrix_runs():
    # Needs no herd7: shows the gate itself.
    test = "tests/test_litmus.py::test_every_policy_has_tagged_orders"
    plain = pytest_child(test, matrix=False)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert counts(plain.stdout) == {"skipped": 1}, plain.stdout
    assert "marker 'tools' needs spin and herd7 from the Debian unstable root" in plain.stdout
    selected = pytest_child(test, matrix=True)
    assert selected.returncode == 0, selected.stdout + selected.stderr
    assert counts(selected.stdout) == {"passed": 1}, selected.stdout


# ---------------------------------------------------------------- tools/matrix.py --python
def load_matrix():
    """tools/matrix.py as a module (it is a script, standard library only)."""
    spec = importlib.util.spec_from_file_location("dc_matrix_tool", REPO / "tools" / "matrix.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def matrix(monkeypatch):
    monkeypatch.delenv("DC_INTERPRETER_NAME", raising=False)
    monkeypatch.delenv("DC_INTERPRETER_SOURCE", raising=False)
    return load_matrix()


def test_matrix_python_path_derives_name_and_source(matrix):
    it = matrix.custom_interp(sys.executable)
    assert it.why_missing == ""
    assert it.name == f"cp{sys.version_info[0]}{sys.version_info[1]}{sys.abiflags}-custom"
    assert it.source == f"path:{os.path.abspath(sys.executable)}"
    assert it.python == os.path.abspath(sys.executable)
    # Its venv lives in the cache, never in the work tree or under a Debian root.
    assert Path(it.venv).parent == matrix.CACHE / "venvs" and not it.in_sid
    assert matrix.select(None, python=sys.executable)[0].name == it.name


def test_matrix_python_path_takes_names_from_the_environment(matrix, monkeypatch):
    monkeypatch.setenv("DC_INTERPRETER_NAME", "cpython-main")
    monkeypatch.setenv("DC_INTERPRETER_SOURCE", "build tree ~/cpython")
    it = matrix.custom_interp(sys.executable)
    assert (it.name, it.source) == ("cpython-main", "build tree ~/cpython")


def test_matrix_python_path_says_why_an_interpreter_is_unusable(matrix, tmp_path):
    missing = matrix.custom_interp(str(tmp_path / "no-such-python"))
    assert missing.python is None and "does not run" in missing.why_missing
    # The matrix reports it as missing instead of failing later in a venv.
    ready = matrix.prepare([missing])
    assert ready == []


def test_matrix_help_documents_python():
    p = subprocess.run(
        [sys.executable, str(REPO / "tools" / "matrix.py"), "test", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0 and "--python PATH" in p.stdout


def test_every_run_once_check_of_the_matrix_is_skipped_by_plain_pytest(matrix):
    import conftest

    once_markers = {marker for _, _, marker in matrix.ONCE_CHECKS}
    assert once_markers <= set(conftest.MATRIX_ONLY), (
        "a run-once check of tools/matrix.py would run under plain pytest: add its marker to "
        "tests/conftest.py MATRIX_ONLY with the reason"
    )


def test_matrix_reports_an_aborted_session_with_the_tests_that_did_not_run(matrix, tmp_path):
    """A KeyboardInterrupt that escapes a test stops pytest early.

    The matrix says so, with counts.
    """
    (tmp_path / "test_escape.py").write_text("def test_escapes():\n    raise KeyboardInterrupt\n")
    report, xml = tmp_path / "session.json", tmp_path / "junit.xml"
    env = dict(os.environ, DC_SESSION_REPORT=str(report))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            f"--junitxml={xml}",
            "tests/test_item.py",
            str(tmp_path / "test_escape.py"),
            "tests/test_queue.py",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert p.returncode == 2, p.stdout + p.stderr  # pytest's "interrupted"
    passed, failed, skipped = matrix.junit_counts(xml)
    said = matrix.session_aborted(report, p.returncode, passed + failed + skipped)
    selected = json.loads(report.read_text())["selected"]
    m = re.fullmatch(
        r"pytest session aborted \(interrupted\): (\d+) of (\d+) selected tests did not run", said
    )
    assert m, said
    assert int(m[2]) == selected and int(m[1]) == selected - (passed + failed + skipped) > 0, said
    # A complete session is not reported.
    report.write_text(json.dumps({"selected": 3, "finished": True, "exitstatus": 0}))
    assert matrix.session_aborted(report, 0, 3) == ""


def test_matrix_load_starts_busy_processes_and_reaps_them(matrix):
    """``matrix.py test --load N`` (``make test LOAD=N``): N busy processes run
    until the command ends, and none is left behind."""
    procs = matrix.start_load(2)
    try:
        assert len(procs) == 2 and all(p.poll() is None for p in procs)
    finally:
        matrix.stop_load(procs)
    assert all(p.returncode is not None for p in procs)
    assert matrix.start_load(0) == []
    with pytest.raises(SystemExit, match="--load -1"):
        matrix.start_load(-1)


HOLDER = """
import importlib.util, sys, time
from pathlib import Path
spec = importlib.util.spec_from_file_location("m", sys.argv[1])
m = importlib.util.module_from_spec(spec)
sys.modules["m"] = m
spec.loader.exec_module(m)
it = next(i for i in m.MATRIX if i.name == "cp312-pyenv")
with m.env_lock(it, "holding it for a test"):
    Path(sys.argv[2]).write_text("held")
    time.sleep(float(sys.argv[3]))
"""


def test_a_lock_wait_says_who_holds_the_lock_and_repeats_while_waiting(
    matrix, tmp_path, monkeypatch, capsys
):
    """Two checkouts share the environments: one that waits for another's lock
    prints the holder (pid, command, checkout, for how long, doing what) at
    once and then a line every LOCK_PROGRESS_S, never waiting silently."""
    hold_s = 3.0
    marker = tmp_path / "held"
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(REPO / "tools" / "matrix.py"), str(marker), str(hold_s)],
        env=dict(os.environ, DC_CACHE=str(tmp_path / "cache"), DC_MATRIX_HELD=""),
    )
    try:
        deadline = time.monotonic() + TIMEOUT_S  # a hang guard for the child's start
        while not marker.exists():
            assert child.poll() is None, "the lock holder died before taking the lock"
            assert time.monotonic() < deadline, "hang guard: the holder never took the lock"
            time.sleep(0.05)
        monkeypatch.setattr(matrix, "CACHE", tmp_path / "cache")
        monkeypatch.setattr(matrix, "LOCK_PROGRESS_S", 0.5)
        monkeypatch.delenv("DC_MATRIX_HELD", raising=False)
        it = next(i for i in matrix.MATRIX if i.name == "cp312-pyenv")
        with matrix.env_lock(it, "the waiter"):
            pass
    finally:
        child.wait(TIMEOUT_S)
    out = capsys.readouterr().out.splitlines()
    waits = [ln for ln in out if "waiting (" in ln]
    # The holder keeps the lock hold_s after the marker: at least two lines half a second apart.
    assert len(waits) >= 2, out
    for ln in waits:
        assert f"held by pid {child.pid} (" in ln and f"of checkout {REPO}" in ln, ln
        assert "(holding it for a test)" in ln and "holding it for 0 min" in ln, ln
    assert any("got the lock after" in ln for ln in out), out
