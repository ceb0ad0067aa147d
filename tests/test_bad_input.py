# SPDX-License-Identifier: Apache-2.0
"""Bad input and resource failures get a clear error, never undefined
behaviour, an abort or a payload cleaned twice."""

import glob
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

BAD_TIMEOUTS = [float("inf"), float("-inf"), float("nan"), -1.0, 1e10]


@pytest.mark.parametrize("t", BAD_TIMEOUTS, ids=str)
def test_wait_idle_rejects_bad_timeouts(dc, t):
    d = dc.SimulatedDriver()
    with pytest.raises(ValueError, match="finite number of seconds"):
        d.wait_idle(t)


@pytest.mark.parametrize("t", BAD_TIMEOUTS + [0.0], ids=str)
def test_configure_rejects_bad_bounds(dc, t):
    before = dc.settings()
    with pytest.raises(ValueError):
        dc.configure(stale_claim_s=t)
    if t != 0.0:
        with pytest.raises(ValueError):
            dc.configure(exit_wait_s=t)
    assert dc.settings() == before, "a refused setting must not change anything"


def test_wait_idle_accepts_the_bounds(dc):
    d = dc.SimulatedDriver()
    assert d.wait_idle(0.0) is True
    assert d.wait_idle(365 * 24 * 3600.0) is True  # idle: returns at once


def _ten_held(dc, recorder):
    """A simulated driver holding the destructor calls of ten payloads
    (finalizer ``recorder``) of a destroyed graph."""
    d = dc.SimulatedDriver()
    g = d.create_graph()
    for i in range(10):
        g.attach(i, recorder)
    d.set_hold(True)
    g.destroy()
    return d


def test_release_with_no_thread_keeps_calls_held(dc, recorder, wait):
    d = _ten_held(dc, recorder)
    d._test_fail_thread_starts(100)
    with pytest.raises(dc.DriverError, match="nothing was released"):
        d.release(4)
    assert d.held == 10 and recorder.calls == {}
    d._test_fail_thread_starts(0)
    assert d.release(4) == 10
    assert d.wait_idle(10)
    assert wait(lambda: recorder.calls == {i: 1 for i in range(10)})


def test_release_with_fewer_threads_still_delivers_everything(dc, recorder, wait):
    d = _ten_held(dc, recorder)
    d._test_fail_thread_starts(100, after=2)  # two starts succeed, then every start fails
    with pytest.raises(dc.DriverError, match="started 2 of 4 threads"):
        d.release(4)
    d._test_fail_thread_starts(0)
    assert d.held == 0
    assert d.wait_idle(10)
    assert wait(lambda: recorder.calls == {i: 1 for i in range(10)}), (
        "every call is delivered by the two threads"
    )


def test_attach_cleans_once_when_the_error_message_cannot_be_built(dc, recorder, wait, delta):
    """bad_alloc while building the hand-over failure's message: nothing was
    released yet, so the payload is cleaned exactly once, here."""
    dlt = delta()
    d = dc.SimulatedDriver()
    g = d.create_graph()
    d.fail_next_retains(1)
    d._test_fail_message_alloc(1)
    with pytest.raises(MemoryError):
        g.attach(1, recorder)
    assert d.wait_idle(5)
    dc.drain_now()
    assert recorder.calls == {1: 1}
    assert dlt("cleaned") == 1


def test_refused_creation_off_the_main_thread_is_cleaned_on_the_main_thread(dc, recorder, wait):
    d = dc.SimulatedDriver()
    g = d.create_graph()
    d.fail_next_creates(1)
    errors = []

    def worker():
        try:
            g.attach(7, recorder)
        except dc.DriverError as e:
            errors.append(e)

    t = threading.Thread(target=worker)
    t.start()
    t.join(10)
    assert errors and "released" in str(errors[0])
    assert wait(lambda: recorder.calls == {7: 1})
    assert recorder.threads == {threading.main_thread().ident}, (
        "the finalizer ran off the main thread"
    )


def test_probe_thread_never_joined_does_not_abort_at_exit():
    code = textwrap.dedent("""
        import deferred_cleanup
        from deferred_cleanup import _native
        _native.probe.start_foreign_add(50)
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, (p.returncode, p.stderr)


def _probe_load(path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "deferred_cleanup.probe", "--load", str(path), "--check"],
        capture_output=True,
        text=True,
        timeout=60,  # a hang guard: the command reads one file and exits
    )


_GOOD_METADATA = {
    "name": "cp312-x",
    "version": "3.12.3",
    "version_info": [3, 12, 3],
    "source": "path:/x",
    "debug": False,
    "gil_disabled": False,
}


@pytest.mark.parametrize(
    "content,words",
    [
        (None, "cannot read the file"),
        ("{not json", "not JSON"),
        ("[1, 2]", "a JSON list, not an object"),
        (json.dumps({"fields": {}}), 'no "interpreter" and "fields" objects'),
        (json.dumps({"interpreter": {"name": "x"}, "fields": {}}), "interpreter has no version"),
        (
            json.dumps(
                {"interpreter": dict(_GOOD_METADATA, version="x", version_info=None), "fields": {}}
            ),
            "interpreter.version 'x'",
        ),
    ],
    ids=["missing", "not-json", "not-an-object", "no-interpreter", "no-version", "bad-version"],
)
def test_probe_load_of_a_bad_file_is_one_line_and_exit_2(tmp_path, content, words):
    """Exit 1 means "CPython behaviour changed" to a CI script: a missing or
    malformed --load file is a usage error instead (2), said in one line on
    stderr, with no traceback."""
    f = tmp_path / "result.json"
    if content is not None:
        f.write_text(content)
    p = _probe_load(f)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert lines[0].startswith(f"python -m deferred_cleanup.probe: --load {f}: "), lines
    assert words in lines[0], lines
    assert p.stdout == "", "nothing is printed as if measured"


# ---------------------------------------------------------------- make's own bad input
REPO = Path(__file__).resolve().parent.parent
OLD_PYTHON = """#!/bin/sh
# Answers tools/matrix.py's metadata question as a CPython 3.9 would; runs nothing else.
echo '{"version": "3.9.18", "version_info": [3, 9, 18], "debug": false, \
"gil_disabled": false, "implementation": "CPython"}'
"""


def _make(*args: str) -> subprocess.CompletedProcess:
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make on PATH in this environment (the Makefile's checks need it)")
    # An outer make (make test) passes its command line's variables down in MAKEFLAGS.
    drop = ("PYTHON", "MATRIX_PYTHON", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return subprocess.run(
        [make, "--no-print-directory", "-n", *args],  # -n: only the parse-time checks act
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,  # a hang guard: make reads the Makefile and asks one interpreter
    )


def _one_error_line(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stdout == "", "nothing ran"
    return lines[0]


def test_make_with_a_wrong_target_says_so_in_one_line_and_exits_2():
    line = _one_error_line(_make("nosuchtarget"))
    assert "no target 'nosuchtarget'" in line and "make help" in line, line


@pytest.mark.parametrize("goal", ["probe", "test"])
def test_make_with_a_missing_python_says_so_in_one_line_and_exits_2(tmp_path, goal):
    line = _one_error_line(_make(goal, f"PYTHON={tmp_path / 'no-such-python'}"))
    assert f"PYTHON={tmp_path / 'no-such-python'}:" in line and "does not run" in line, line


@pytest.mark.parametrize("goal", ["probe", "test"])
def test_make_with_a_python_older_than_3_10_is_refused_by_another_interpreter(tmp_path, goal):
    """The interpreter under test is too old to run the tools (3.9 has no
    zip(strict=)); the refusal comes from the tools interpreter, in one line.
    The stand-in 3.9 can only answer the metadata question: had make run the
    tools on it, the line would be its JSON, not this sentence."""
    old = tmp_path / "python3.9"
    old.write_text(OLD_PYTHON)
    old.chmod(0o755)
    line = _one_error_line(_make(goal, f"PYTHON={old}"))
    assert "is Python 3.9.18; deferred-cleanup needs CPython 3.10 or newer" in line, line


def test_matrix_on_a_python_older_than_3_10_says_so_in_one_line_and_exits_2():
    """tools/matrix.py run by a Python 3.9 itself (MATRIX_PYTHON=python3.9):
    one line, exit 2, never `zip() takes no keyword arguments`."""
    candidates = [
        shutil.which("python3.9"),
        *glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python3")),
    ]
    old = next(
        (
            c
            for c in filter(None, candidates)
            if subprocess.run(
                [c, "-c", "import sys; sys.exit(sys.version_info[:2] != (3, 9))"],
                capture_output=True,
            ).returncode
            == 0
        ),
        None,
    )
    if old is None:
        pytest.skip("no working Python 3.9 here (PATH, pyenv) to run tools/matrix.py with")
    p = subprocess.run(
        [old, str(REPO / "tools" / "matrix.py"), "probe", "--python", sys.executable],
        capture_output=True,
        text=True,
        timeout=60,  # a hang guard: it exits before doing anything
    )
    line = _one_error_line(p)
    assert "needs Python 3.10 or newer to run" in line, line
