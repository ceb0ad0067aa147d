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

import dataclasses
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


# ------------------------------------------------------- tools/matrix.py test's jobs at once
def _fake_jobs(matrix, spec):
    """Job objects from (label, shares, rank) triples, on a placeholder interpreter."""
    it = next(i for i in matrix.MATRIX if i.name == "cp312-pyenv")
    return [matrix.Job(label, it, "m", frozenset(shares), rank) for label, shares, rank in spec]


def _recorder(hold_s: float, pairs: bool = False):
    """A run_one for matrix.schedule that records when each job ran.

    With pairs, each job also waits (a hang guard of TIMEOUT_S) at a barrier
    of two, so a schedule that ran fewer than two at a time fails."""
    import threading

    lock, spans, live = threading.Lock(), {}, [0, 0]  # live: now, most at once
    barrier = threading.Barrier(2, timeout=TIMEOUT_S)

    def run_one(job):
        with lock:
            live[0] += 1
            live[1] = max(live[1], live[0])
        t0 = time.monotonic()
        if pairs:
            barrier.wait()
        time.sleep(hold_s)
        with lock:
            live[0] -= 1
            spans[job.label] = (t0, time.monotonic())
        return f"result of {job.label}"

    return run_one, spans, live


def test_matrix_schedule_runs_every_job_once_at_most_workers_at_a_time(matrix, capsys):
    """``make test``'s jobs run up to --jobs at once, longest (lowest rank)
    first, and their results come back in the table's order."""
    jobs = _fake_jobs(matrix, [(f"j{i}", (), 9 - i) for i in range(6)])
    run_one, spans, live = _recorder(0.2, pairs=True)
    results = matrix.schedule(jobs, 2, run_one, progress_s=0.1)
    assert results == [f"result of j{i}" for i in range(6)]
    assert live[1] == 2 and sorted(spans) == [f"j{i}" for i in range(6)]
    # Rank order, two at a time: j5 and j4 (ranks 4, 5) first, j1 and j0 last.
    starts = sorted(spans, key=lambda k: spans[k][0])
    assert [set(starts[i : i + 2]) for i in (0, 2, 4)] == [
        {"j5", "j4"},
        {"j3", "j2"},
        {"j1", "j0"},
    ], starts
    # A progress line while jobs ran (progress_s 0.1 against 0.2 s jobs).
    assert "running j" in capsys.readouterr().out


def test_matrix_schedule_never_runs_two_jobs_that_share_a_directory_at_once(matrix):
    """Jobs that write the same directory (SHARED_DIRS, an interpreter's
    build/examples) never overlap; a job that must wait lets a later one start."""
    import threading

    jobs = _fake_jobs(
        matrix,
        [("a", {"d"}, 0), ("b", {"d"}, 1), ("c", (), 2), ("e", {"d", "x"}, 3)],
    )
    run_one, spans, _ = _recorder(0.05)
    c_started = threading.Event()

    def run(job):
        if job.label == "c":
            c_started.set()
        elif job.label == "a":
            # c must start while a runs, not behind b (hang guard: TIMEOUT_S).
            assert c_started.wait(TIMEOUT_S), "c waited behind a job it shares nothing with"
        return run_one(job)

    matrix.schedule(jobs, 3, run)
    shared = sorted(spans[k] for k in ("a", "b", "e"))
    for (_, end), (start, _) in zip(shared, shared[1:], strict=False):
        assert start >= end, spans


def test_matrix_schedule_raises_a_jobs_error_after_the_others_end(matrix):
    jobs = _fake_jobs(matrix, [("ok", (), 0), ("bad", (), 1)])

    def run_one(job):
        if job.label == "bad":
            raise RuntimeError("boom")
        return 1

    with pytest.raises(RuntimeError, match="boom"):
        matrix.schedule(jobs, 2, run_one)


def _fake_prepare(matrix, monkeypatch, fail: str | None = None):
    """Three placeholder environments for matrix.prepare, with discovery,
    provisioning and the lock replaced by recorders and build() by a
    recorder that holds each build at a barrier of two (hang guard:
    TIMEOUT_S), so that builds run one at a time fail it.  Returns (envs,
    events, live): events lists ("lock"/"build", name) in order; live[1] is
    the most builds at once."""
    import contextlib
    import threading

    base = next(i for i in matrix.MATRIX if i.name == "cp312-pyenv")
    envs = [dataclasses.replace(base, name=f"e{i}") for i in range(3)]
    lock, events, live = threading.Lock(), [], [0, 0]
    barrier = threading.Barrier(2, timeout=TIMEOUT_S)

    @contextlib.contextmanager
    def env_lock(it, doing):
        with lock:
            events.append(("lock", it.name))
        yield

    def build(it, src):
        with lock:
            live[0] += 1
            live[1] = max(live[1], live[0])
        try:
            if it.name != "e2":  # e2 builds alone, after e0 and e1 met at the barrier
                barrier.wait()
            if it.name == fail:
                raise SystemExit(f"[matrix] failed: {it.name}")
        finally:
            with lock:
                live[0] -= 1
                events.append(("build", it.name))

    monkeypatch.setattr(matrix, "discover", lambda it: setattr(it, "python", "/bin/true"))
    monkeypatch.setattr(matrix, "provision", lambda it: None)
    monkeypatch.setattr(matrix, "env_lock", env_lock)
    monkeypatch.setattr(matrix, "build", build)
    monkeypatch.setattr(matrix, "source_hash", lambda: "h")
    return envs, events, live


def test_matrix_prepare_builds_at_once_after_taking_every_lock(matrix, monkeypatch):
    """make test (prepare with hold and build_jobs 2): every environment's
    lock is taken first, in the matrix's order, then the builds run two at a
    time, each environment built once, and every environment is ready."""
    import contextlib

    envs, events, live = _fake_prepare(matrix, monkeypatch)
    with contextlib.ExitStack() as held:
        ready = matrix.prepare(envs, hold=held, build_jobs=2)
    assert [it.name for it in ready] == ["e0", "e1", "e2"]
    assert events[:3] == [("lock", "e0"), ("lock", "e1"), ("lock", "e2")], events
    assert sorted(events[3:]) == [("build", "e0"), ("build", "e1"), ("build", "e2")], events
    assert live[1] == 2, f"at most {live[1]} builds at once, where 2 were allowed"


def test_matrix_build_at_once_stops_on_a_failed_build_after_the_others_end(matrix, monkeypatch):
    """A failed build raises its SystemExit once the build running beside it
    has ended; a build not started when the failure was recorded (the stop
    event set) never starts.  e1 ends only after the stop event is set (a
    hang guard of TIMEOUT_S), so its worker then takes e2: which
    interleaving it is does not depend on the scheduler."""
    import threading

    envs, events, live = _fake_prepare(matrix, monkeypatch, fail="e0")
    stop = threading.Event()
    fake_build = matrix.build

    def build(it, src):
        try:
            fake_build(it, src)
        finally:
            if it.name == "e1":
                assert stop.wait(TIMEOUT_S), "e0's failure never set the stop event"

    monkeypatch.setattr(matrix, "build", build)
    with pytest.raises(SystemExit, match="failed: e0"):
        matrix.build_at_once(envs, "h", 2, stop=stop)
    assert live[0] == 0, "a build still ran when build_at_once() raised"
    assert ("build", "e1") in events and ("build", "e2") not in events, events


def test_matrix_prepare_raises_a_failed_build(matrix, monkeypatch):
    """prepare() (make test's way, hold and build_jobs 2) raises a failed
    build's SystemExit, after the build beside it has ended."""
    import contextlib

    envs, events, live = _fake_prepare(matrix, monkeypatch, fail="e0")
    with contextlib.ExitStack() as held, pytest.raises(SystemExit, match="failed: e0"):
        matrix.prepare(envs, hold=held, build_jobs=2)
    assert live[0] == 0 and ("build", "e1") in events, events


def test_matrix_run_job_logs_output_counts_its_own_cpu_and_prints_a_failure(
    matrix, monkeypatch, tmp_path, capsys
):
    """run_job: the session's output goes to build/logs/test-TAG.log, its CPU
    time is its own (os.wait4), and a failed session's FAILURES section is
    printed so that a CI log shows it."""
    child = (
        "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3:\n    pass\n"
        "print('noise')\nprint('==== FAILURES ====')\nprint('the failing assert')\n"
        "raise SystemExit(1)\n"
    )
    monkeypatch.setattr(matrix, "in_env", lambda it, argv: [sys.executable, "-c", child])
    monkeypatch.setattr(matrix, "BUILD", tmp_path / "build")
    monkeypatch.setattr(matrix, "REPO", tmp_path)
    (tmp_path / "build" / "test").mkdir(parents=True)
    (job,) = _fake_jobs(matrix, [("mutate (cp312-pyenv)", (), 0)])
    rc, wall, cpu, log = matrix.run_job(job, "x", tmp_path / "build" / "test", [], stream=False)
    assert rc == 1 and log == tmp_path / "build" / "logs" / "test-mutate.log"
    assert 0.25 <= cpu <= wall + 0.5, (cpu, wall)
    assert "noise" in log.read_text()
    out = capsys.readouterr().out
    assert "==== FAILURES ====\nthe failing assert" in out and "noise" not in out, out


def test_matrix_test_refuses_a_negative_jobs_count():
    p = subprocess.run(
        [sys.executable, str(REPO / "tools" / "matrix.py"), "test", "--jobs", "-1"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert p.returncode == 2 and "--jobs -1" in p.stderr and p.stderr.count("\n") == 1, p.stderr
