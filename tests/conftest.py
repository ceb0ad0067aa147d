# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures for the deferred-cleanup test suite.

Other helpers may append fixtures below the marked section.  Every fixture
that waits has a deadline; subprocess scenarios run under a timeout.

Plain ``pytest`` in a checkout (after ``pip install .[test]``) runs what needs
nothing but the installed package: the tests marked in :data:`MATRIX_ONLY`
skip, each with its reason, unless ``DC_MATRIX=1`` is set in the environment.
``tools/matrix.py`` (``make test``, ``make soak``, ``tools/matrix.py run``) sets
it for every job it runs, in an environment it provisioned for them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SCENARIOS = TESTS / "scenarios"
sys.path.append(str(TESTS.parent / "tools"))  # last: shadows nothing
import matrix  # noqa: E402  (tools/matrix.py: standard library only)

#: How many times an idle machine's wall-clock bound a hang guard allows: the
#: load measured when the tests are collected (tools/matrix.py load_scale():
#: the 1-minute load average per core, at least 1; 4.5 at load 8 on 2 cores).
LOAD = matrix.load_scale()


def hang_guard(seconds: float) -> int:
    """A hang guard's bound for the tests: seconds times :data:`LOAD`, rounded.

    Use it for a wall-clock bound that only catches a hang (a pytest-timeout
    mark, a subprocess timeout, a C++ test's deadline), never for a speed
    check: seconds is a generous bound on an idle machine, and the bound grows
    with the load measured when the tests were collected (tools/matrix.py
    hang_guard), so the suite stays green with both cores busy.

    Args:
        seconds (float): the bound on an idle machine, in seconds.
    Returns:
        int: the bound now, in whole seconds (``round(seconds * LOAD)``).
    Raises:
        Nothing.
    """
    return round(matrix.hang_guard(seconds, LOAD))


# ---------------------------------------------------------------- what plain pytest runs

#: Markers whose tests run only where tools/matrix.py selected them (DC_MATRIX=1), and why.
MATRIX_ONLY = {
    "docs": (
        "builds the docs site with tools/docs.sh, which installs Doxygen and Chromium with apt as "
        "root"
    ),
    "tools": (
        "needs spin and herd7 from the Debian unstable root that tools/sid-root.sh makes as root"
    ),
    "hardware": (
        "builds tests/cpp/lost_wakeup.cpp and gate_sb.cpp with CMake and races up to 10**7 "
        "handoffs per variant and 3*10**6 gate rounds per policy on this CPU"
    ),
    "soak": (
        "the finalization soak starts SOAK_N (20) child interpreters per case, about 2 minutes in "
        "all"
    ),
    "sanitize": (
        "builds tests/cpp under ThreadSanitizer and AddressSanitizer (apt installs GoogleTest if "
        "missing)"
    ),
    "mutate": "rebuilds the C++ suite once per mutant in tests/mutants (minutes)",
    "production": (
        "builds deferred_cleanup._native once more with CMake, without the test hooks "
        "(DC_TEST_HOOKS=OFF), about a minute"
    ),
    "format": (
        "runs clang-format and ruff over the repository (ruff from the docs environment), and "
        "the repository's file checks (licence, SPDX lines, version, every core header compiling "
        "alone with g++)"
    ),
    "bench": (
        "builds tests/bench with CMake (apt installs Google Benchmark if missing) and runs each "
        "benchmark once"
    ),
    "examples": (
        "builds the wheel, installs it into a fresh virtual environment and builds every "
        "example against it with CMake (tools/examples.py, minutes)"
    ),
    "examples_package": (
        "builds the wheel and compares its package with cmake --install's, and builds an example "
        "with a header or a CMake file removed (tools/examples.py --break, minutes)"
    ),
}


#: tools/mutate.py on a mutant (not with --complete): the mutant's KILLING_TESTS
#: (a JSON list of substrings of test ids).  They run first, and the session
#: stops once each has failed (with an empty list, at the first failure), as
#: the C++ checks do.  Taken out of the environment at once, like the report
#: below, so that sessions the tests start themselves never stop early.
_MUTATE_STOP = os.environ.pop("DC_MUTATE_STOP_AFTER", None)
_mutate_stop_wanted: list[str] = json.loads(_MUTATE_STOP) if _MUTATE_STOP else []
_mutate_failures: list[str] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Under tools/mutate.py on a mutant, stop the session once it is killed as named.

    Args:
        item (pytest.Item): the test; its session is told to stop.
        call (pytest.CallInfo): one phase of the test; a failed phase counts.

    Returns:
        pytest.TestReport: the phase's report, unchanged.  Sets
        ``item.session.shouldfail`` when every wanted test id has failed (as
        ``-x`` does: pytest exits 1, tests failed, which tools/mutate.py counts
        as the check failing; ``shouldstop`` would exit 2, interrupted, an error).
    """
    report = yield
    if _MUTATE_STOP is not None and report.failed:
        _mutate_failures.append(report.nodeid)
        if all(any(w in f for f in _mutate_failures) for w in _mutate_stop_wanted):
            item.session.shouldfail = (
                "mutant killed as named (tools/mutate.py); the other tests were not run"
            )
    return report


#: Why a test marked ``test_hooks`` skips on a production build.
TEST_HOOKS_ABSENT = (
    "needs a `_test_` hook: this deferred_cleanup._native is a production build "
    "(CMake option DC_TEST_HOOKS=OFF); tools/matrix.py builds with it ON"
)


def _native_has_test_hooks() -> bool:
    """Whether the installed ``deferred_cleanup._native`` was built with DC_TEST_HOOKS.

    Returns:
        bool: ``_native.TEST_HOOKS``; True when the module cannot be imported
        here (the tests then fail on the import itself, not as skips).
    """
    try:
        from deferred_cleanup import _native
    except ImportError:
        return True
    # A build older than the TEST_HOOKS attribute had the hooks compiled in.
    return bool(getattr(_native, "TEST_HOOKS", hasattr(_native, "_test_lose_calls")))


def pytest_collection_modifyitems(config, items):
    """Skip the :data:`MATRIX_ONLY` tests unless ``DC_MATRIX=1`` (set by tools/matrix.py),
    and the tests marked ``test_hooks`` on a production build of ``_native``;
    under tools/mutate.py on a mutant, run its killing tests first (stable order).

    Args:
        config (pytest.Config): unused.
        items (list[pytest.Item]): the collected tests; a skip marker is added, or
            the list reordered, in place.

    Returns:
        None.
    """
    hooks = _native_has_test_hooks()
    for item in items:
        if not hooks and item.get_closest_marker("test_hooks") is not None:
            item.add_marker(pytest.mark.skip(reason=TEST_HOOKS_ABSENT))
    if _MUTATE_STOP is not None:
        items.sort(key=lambda it: not any(w in it.nodeid for w in _mutate_stop_wanted))
    if os.environ.get("DC_MATRIX") == "1":
        return
    for item in items:
        for name, why in MATRIX_ONLY.items():
            if item.get_closest_marker(name) is not None:
                item.add_marker(
                    pytest.mark.skip(
                        reason=(
                            f"marker '{name}' {why}: `make test` runs it; DC_MATRIX=1 runs it here"
                        )
                    )
                )
                break


#: Where this session reports (tools/matrix.py sets it).  Taken out of the
#: environment at once, so that pytest sessions that tests start themselves
#: (tools/mutate.py's checks, the first-use tests) cannot overwrite the report.
_SESSION_REPORT = os.environ.pop("DC_SESSION_REPORT", "")


def _session_report(**fields) -> None:
    """Write what this session selected and how it ended to ``$DC_SESSION_REPORT``.

    tools/matrix.py sets the variable and compares ``selected`` with what the
    JUnit XML counts: a session that aborted (a KeyboardInterrupt that escaped
    a test, an internal error, a crash) is reported with the number of its
    selected tests that never ran, instead of as a short green run.

    Args:
        **fields: merged into the JSON object already in the file.

    Returns:
        None.  Does nothing when the variable is unset.
    """
    path = _SESSION_REPORT
    if not path:
        return
    p = Path(path)
    data = json.loads(p.read_text()) if p.exists() else {}
    data.update(fields)
    p.write_text(json.dumps(data))


def pytest_collection_finish(session):
    """Record how many tests were selected, before the first one runs.

    See :func:`_session_report`.
    """
    _session_report(selected=len(session.items), finished=False)


def pytest_sessionfinish(session, exitstatus):
    """Record the session's exit status (2 when interrupted; see :func:`_session_report`)."""
    _session_report(exitstatus=int(exitstatus), finished=True)


# ---------------------------------------------------------------- reference fixtures


@pytest.fixture
def dc():
    """The deferred_cleanup package, with the queue drained before and after.

    Returns:
        module: ``deferred_cleanup``.
    """
    import deferred_cleanup

    deferred_cleanup.drain_now()
    yield deferred_cleanup
    deferred_cleanup.drain_now()


class Delta:
    """Counter differences since construction (``counters()`` snapshots, no entry point)."""

    def __init__(self, module):
        self._dc = module
        self.before = module.counters()

    def __call__(self, key: str) -> int:
        """Return how much counter ``key`` (str) grew since construction (int)."""
        return self._dc.counters()[key] - self.before[key]


@pytest.fixture
def delta(dc):
    """Factory: ``delta()`` returns a fresh :class:`Delta` baseline."""
    return lambda: Delta(dc)


def build_race_program(target: str) -> Path:
    """Build one hardware race program of tests/cpp (``lost_wakeup`` or
    ``gate_sb``; CMake, -O2, no GoogleTest) into build/lost-wakeup-test.

    Args:
        target (str): the CMake target and executable name.

    Returns:
        Path: the executable.

    Raises:
        pytest.fail: when cmake or a C++ compiler is missing, or the build fails.
    """
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not found: the hardware check needs cmake and a C++20 compiler")
    build = TESTS.parent / "build" / "lost-wakeup-test"
    build.mkdir(parents=True, exist_ok=True)
    for cmd in (
        [
            "cmake",
            "-S",
            str(TESTS / "cpp"),
            "-B",
            str(build),
            "-DDC_LOST_WAKEUP_ONLY=ON",
            "-DCMAKE_BUILD_TYPE=None",
        ],
        ["cmake", "--build", str(build), "--target", target],
    ):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            pytest.fail(f"{' '.join(cmd)} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return build / target


def wait_until(predicate, timeout_s: float = 10.0, step_s: float = 0.0005) -> bool:
    """Sleep in ``step_s`` steps (dropping the GIL, calling no entry point)
    until ``predicate()`` is true.

    Args:
        predicate (callable): no arguments, returns bool.
        timeout_s (float): seconds before giving up.
        step_s (float): seconds per sleep.

    Returns:
        bool: whether the predicate became true in time.
    """
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(step_s)
    return True


@pytest.fixture
def wait():
    """The :func:`wait_until` helper."""
    return wait_until


class Recorder:
    """A finalizer that records, per payload, how often and on which thread it ran."""

    def __init__(self):
        self.calls: dict[int, int] = {}
        self.order: list[int] = []
        self.threads: set[int] = set()
        self._lock = threading.Lock()

    def __call__(self, obj) -> None:
        with self._lock:
            self.calls[obj] = self.calls.get(obj, 0) + 1
            self.order.append(obj)
            self.threads.add(threading.get_ident())


@pytest.fixture
def recorder():
    """A fresh :class:`Recorder`."""
    return Recorder()


def run_scenario(
    name: str,
    *args: str,
    variant: str = "reference",
    timeout_s: float = 60.0,
    tmp: Path,
    extra_env: dict | None = None,
) -> dict:
    """Run ``tests/scenarios/<name>.py`` in a fresh interpreter.

    Args:
        name (str): scenario file stem.
        *args (str): command-line arguments for the scenario.
        variant (str): ``DEFERRED_CLEANUP_VARIANT`` for the child.
        timeout_s (float): seconds before the child is killed (the test fails).
        tmp (Path): directory for the result files.
        extra_env (dict | None): more environment variables.

    Returns:
        dict: ``rc`` (int, negative = killed by that signal), ``stdout``,
        ``stderr`` (str), ``result`` (dict printed by the scenario as its last
        stdout line, or None) and ``at_exit`` (dict written by the Py_AtExit
        backstop through DC_STATS_AT_EXIT, or None).

    Raises:
        subprocess.TimeoutExpired: the child hung.
    """
    stats = tmp / f"{name}-{variant}-stats.json"
    if stats.exists():
        stats.unlink()
    env = dict(os.environ, DEFERRED_CLEANUP_VARIANT=variant, DC_STATS_AT_EXIT=str(stats))
    if extra_env:
        env.update(extra_env)
    p = subprocess.run(
        [sys.executable, str(SCENARIOS / f"{name}.py"), *args],
        env=env,
        cwd=str(TESTS.parent),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    result = None
    for line in reversed(p.stdout.strip().splitlines()):
        if line.startswith("{"):
            result = json.loads(line)
            break
    at_exit = (
        json.loads(stats.read_text()) if stats.exists() and stats.read_text().strip() else None
    )
    return {
        "rc": p.returncode,
        "stdout": p.stdout,
        "stderr": p.stderr,
        "result": result,
        "at_exit": at_exit,
    }


@pytest.fixture
def scenario(tmp_path):
    """Factory around :func:`run_scenario` writing into the test's tmp_path."""
    return lambda name, *args, **kw: run_scenario(name, *args, tmp=tmp_path, **kw)


@pytest.fixture
def cuda_driver():
    """A :class:`deferred_cleanup.CudaDriver`, or a skip naming why there is none."""
    import deferred_cleanup

    try:
        return deferred_cleanup.CudaDriver()
    except deferred_cleanup.DriverUnavailable as e:
        pytest.skip(f"CUDA driver unavailable: {e}")


# ---------------------------------------------------------------- (other helpers: append below)


@pytest.fixture
def lose_call(dc):
    """``lose_call(n)``: the next n pending calls are lost (``_test_lose_calls``).

    Teardown restores the pending-call path the way the reference does it in
    production: a stale claim re-armed at an entry point (``stale_claim_s``
    lowered for the moment), then waits until the re-armed call ran.
    """
    if not _native_has_test_hooks():
        pytest.skip(TEST_HOOKS_ABSENT)
    yield dc._native._test_lose_calls
    dc._native._test_lose_calls(0)
    old = dc.settings()["stale_claim_s"]
    dc.configure(stale_claim_s=0.01)
    try:
        deadline = time.monotonic() + 10
        while dc.counters()["scheduled"] and time.monotonic() < deadline:
            time.sleep(0.02)
            dc.poll()
        assert not dc.counters()["scheduled"], "the lost claim was not recovered"
    finally:
        dc.configure(stale_claim_s=old)


@pytest.fixture
def claim_never_stale(dc):
    """stale_claim_s set to an hour for the test, restored after.

    A claim seen outstanding for stale_claim_s (1 s by default; its clock
    starts at the first look after the add) is re-armed by a sampled producer
    or an entry point: a second pending call, by design.  A test that counts
    pending calls of one claim uses this, so that its count does not depend
    on how fast a loaded machine runs the burst.

    Returns:
        module: ``deferred_cleanup``.
    """
    old = dc.settings()["stale_claim_s"]
    dc.configure(stale_claim_s=3600.0)
    yield dc
    dc.configure(stale_claim_s=old)
