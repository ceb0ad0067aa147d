# SPDX-License-Identifier: Apache-2.0
"""The mutation kill matrix (tools/mutate.py, tests/mutants/) in ``make test``.

Each mutant is one deliberate breakage of the C++ core; the checks it names
must fail on it (tests/mutants/README.md).  ``make test`` runs the fast subset
(``--fast``: every mutant; one that names a C++ or litmus-tag check skips its
pytest checks, which rebuild the extension; ``make mutate`` runs them).  Before the mutants,
the same checks must pass on the unmutated tree.  The first two tests show
that the runner itself fails where it must: on a stale mutant and on a
mutant that survives.

Runs once (marker ``mutate``), in the cp312-pyenv environment.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.mutate

REPO = Path(__file__).resolve().parent.parent
MUTATE = REPO / "tools" / "mutate.py"


def mutate(*args: str, timeout_s: float) -> subprocess.CompletedProcess:
    """Run tools/mutate.py with args; output captured and echoed (for -s/-rA)."""
    p = subprocess.run(
        [sys.executable, str(MUTATE), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    sys.stdout.write(p.stdout[-20000:])
    sys.stderr.write(p.stderr[-5000:])
    return p


def test_every_mutant_file_is_valid_and_applies():
    p = mutate("--validate", timeout_s=60)
    assert p.returncode == 0, p.stdout + p.stderr
    n = len(list((REPO / "tests" / "mutants").glob("*.py")))
    assert n >= 16 and f"{n} mutants, each FIND found exactly once" in p.stdout


def test_a_stale_mutant_stops_the_run(tmp_path):
    (tmp_path / "stale.py").write_text(
        'FILE = "include/deferred_cleanup/drain.hpp"\n'
        'FIND = "text that is not in the header"\nREPLACE = "x"\n'
        'PROPERTY = "none"\nKILLED_BY = ["litmus"]\n'
    )
    p = mutate(
        "--mutants", str(tmp_path), "--out", str(REPO / "build" / "mutate-selftest"), timeout_s=60
    )
    assert p.returncode == 1
    assert "FIND occurs 0 times" in p.stdout and "stale mutant" in p.stdout


def test_find_survives_reformatting_and_stays_unique(tmp_path):
    """FIND matches modulo whitespace (a formatter may re-indent, break or
    join the lines it names), and still must match exactly once."""
    sys.path.insert(0, str(REPO / "tools"))
    import mutate as tool

    (tmp_path / "a.hpp").write_text("void f() {\n  while (g(1,\n          2)) {}\n}\nint h = 3;\n")
    m = tool.Mutant(
        name="m",
        path=tmp_path / "m.py",
        file="a.hpp",
        find="while (g(1, 2)) {\n  }",
        replace="while (false) {}",
        property="p",
        killed_by=["litmus"],
    )
    assert tool.check_applies(m, tmp_path) == "void f() {\n  while (false) {}\n}\nint h = 3;\n"
    (tmp_path / "a.hpp").write_text("g(1, 2);\ng(1,2);\n")
    m = tool.Mutant(
        name="m",
        path=tmp_path / "m.py",
        file="a.hpp",
        find="g(1, 2);",
        replace="x;",
        property="p",
        killed_by=["litmus"],
    )
    with pytest.raises(tool.MutantError, match="FIND occurs 2 times"):
        tool.check_applies(m, tmp_path)


@pytest.mark.timeout(600)
def test_a_surviving_mutant_fails_the_run(tmp_path):
    """A change no check can notice (a comment) must be reported as survived."""
    (tmp_path / "harmless.py").write_text(
        'FILE = "include/deferred_cleanup/drain.hpp"\n'
        'FIND = "// drain.hpp: the consumer, on the CPython main thread."\n'
        'REPLACE = "// drain.hpp: the consumer (a comment changed by the runner\'s self-test)."\n'
        'PROPERTY = "nothing: a comment"\nKILLED_BY = ["litmus"]\n'
    )
    p = mutate(
        "--mutants", str(tmp_path), "--out", str(REPO / "build" / "mutate-selftest"), timeout_s=540
    )
    assert p.returncode == 1, p.stdout
    assert "control cpp-asan" not in p.stdout  # only the checks the mutants name ran
    assert "survived (passed litmus)" in p.stdout and "NOT KILLED: harmless" in p.stdout


# About 20 minutes of wall time on this 2-core machine when idle.  The bound
# scales with the load measured when the run starts (tools/mutate.py's
# hang_guard: times load_scale(), 4.5 at load 8 on 2 cores), so it is a hang
# guard at any load; the pytest-timeout mark above it is the outer hang guard
# (load 16).
FAST_IDLE_BOUND_S = 1750


@pytest.mark.timeout(FAST_IDLE_BOUND_S * 9 + 60)
def test_every_mutant_is_killed():
    sys.path.insert(0, str(REPO / "tools"))
    import mutate as tool

    bound_s = tool.hang_guard(FAST_IDLE_BOUND_S)
    p = mutate("--fast", timeout_s=bound_s)
    assert p.returncode == 0, (
        "a mutant survived, is stale or did not build (table above; build/mutate/mutate.md)"
    )
    assert "control: the unmutated tree must pass" in p.stdout
    assert "mutants killed" in p.stdout


def test_killing_unit_is_the_one_file_that_defines_every_named_test(tmp_path):
    """tools/mutate.py builds only that tests/cpp file's program for a C++
    check (the whole suite when it returns None)."""
    sys.path.insert(0, str(REPO / "tools"))
    import mutate as tool

    (tmp_path / "a_tests.cpp").write_text(
        "TYPED_TEST(Core, First) {}\nTEST(Shutdown, Second) {}\nTEST_F(Fx, Third) {}\n"
    )
    (tmp_path / "b_tests.cpp").write_text("TEST(Api, Fourth) {}\n")
    (tmp_path / "fake_host.cpp").write_text("TEST(Elsewhere, Fifth) {}\n")  # not a test file

    def unit(*names):
        return tool.killing_unit(list(names), tmp_path)

    assert unit("Core/reference.First", "Shutdown.Second", "Third") == "a_tests"
    assert unit("PendingCall.Fourth", "heap-use-after-free") == "b_tests"
    assert unit("First", "Fourth") is None  # two files: the whole suite
    assert unit("heap-use-after-free") is None and unit() is None  # no test named
    assert unit("Fifth") is None
    # Every C++-first mutant of the repository names a test of one file.
    for m in tool.load_all(REPO / "tests" / "mutants"):
        if m.killed_by[0] in ("cpp", "cpp-asan"):
            assert tool.killing_unit(m.killing_tests) is not None, m.name


def test_a_check_never_runs_against_a_module_other_than_the_one_just_built(tmp_path):
    """tools/mutate.py's incremental build compares the installed module with
    the one it linked (CMake's install skipped a module linked within the
    second of the last install, and a mutant "survived" on the control's
    module); a difference or a missing module is a failed build."""
    sys.path.insert(0, str(REPO / "tools"))
    import mutate as tool

    bdir, package, log = tmp_path / "ext", tmp_path / "site" / "deferred_cleanup", tmp_path / "log"
    bdir.mkdir()
    package.mkdir(parents=True)
    name = "_native.cpython-312-x86_64-linux-gnu.so"
    (bdir / name).write_bytes(b"mutant")
    assert tool.installed_module_differs(bdir, package, log) == 1  # not installed
    (package / name).write_bytes(b"contrl")  # same size, other bytes
    built = os.stat(bdir / name)
    os.utime(package / name, ns=(built.st_atime_ns, built.st_mtime_ns))  # same time, too
    assert tool.installed_module_differs(bdir, package, log) == 1
    assert log.read_text().count("is not the module just built") == 2
    (package / name).write_bytes(b"mutant")
    assert tool.installed_module_differs(bdir, package, log) == 0


def test_a_pytest_check_stops_once_the_mutant_is_killed_as_named(tmp_path):
    """tools/mutate.py sets DC_MUTATE_STOP_AFTER on a mutant's pytest checks:
    tests/conftest.py runs the named killing tests first and stops the session
    once each has failed; with none named, at the first failure; without the
    variable, every test runs."""
    # The checkout's layout: tests/conftest.py imports tools/matrix.py.
    (tmp_path / "tools").mkdir()
    shutil.copy(REPO / "tools" / "matrix.py", tmp_path / "tools" / "matrix.py")
    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy(REPO / "tests" / "conftest.py", tests / "conftest.py")
    (tests / "test_m.py").write_text(
        "def test_a():\n    assert False\n\n\ndef test_b():\n    pass\n\n\n"
        "def test_c():\n    assert False\n\n\ndef test_d():\n    assert False\n"
    )

    def session(stop):
        env = {k: v for k, v in os.environ.items() if k != "DC_MUTATE_STOP_AFTER"}
        if stop is not None:
            env["DC_MUTATE_STOP_AFTER"] = stop
        p = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rf", "test_m.py"],
            cwd=tests,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return p.returncode, sorted(set(re.findall(r"FAILED test_m.py::(\w+)", p.stdout)))

    assert session('["test_d"]') == (1, ["test_d"])
    assert session('["test_c", "test_d"]') == (1, ["test_c", "test_d"])
    assert session("[]") == (1, ["test_a"])
    assert session(None) == (1, ["test_a", "test_c", "test_d"])


def test_the_control_session_selects_and_judges_each_check_as_its_own_session_would(tmp_path):
    """tools/mutate.py's control runs an interpreter's pytest checks in one session
    (tools/mutate_control.py): each check must select exactly the tests pytest
    selects for its arguments alone, and pass, fail (naming its failing tests) or
    error (no test ran) on its own tests only."""
    sys.path.insert(0, str(REPO / "tools"))
    import mutate as tool

    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_x.py").write_text(
        "import pytest\n\n\ndef test_alpha_ok():\n    pass\n\n\ndef test_alpha_bad():\n"
        "    assert False\n\n\ndef test_beta_ok():\n    pass\n\n\n"
        '@pytest.mark.parametrize("v", [1], ids=["last-line"])\ndef test_param(v):\n    pass\n'
    )
    (tests / "test_y.py").write_text(
        "import pytest\n\n\ndef test_gamma_ok():\n    pass\n\n\n"
        'def test_skipped():\n    pytest.skip("skips on purpose")\n'
    )
    checks = {
        "pytest:e:tests/test_x.py -k 'alpha and not bad'": "passed",
        "pytest:e:tests/test_x.py tests/test_y.py -k 'beta or gamma'": "passed",
        "pytest:e:-q tests/test_x.py -k alpha": "failed",
        "pytest:e:tests/test_y.py -k skipped": "error",
        "pytest:e:tests/test_x.py -k last-line": "passed",
        "pytest:e:tests/test_y.py": "passed",
    }
    # Anything but files, -q and one -k runs in a session of its own.
    assert tool.control_spec("pytest:e:tests/test_x.py::test_beta_ok", tmp_path) is None
    assert tool.control_spec("pytest:e:tests/test_x.py -x", tmp_path) is None
    specs = [tool.control_spec(c, tmp_path) for c in checks]
    assert all(specs)
    out = tmp_path / "report.json"
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO / "tools"),
        DC_MUTATE_CONTROL=json.dumps(specs),
        DC_MUTATE_CONTROL_OUT=str(out),
    )
    paths = sorted({p for _, ps, _ in specs for p in ps})
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "mutate_control", *paths],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,  # a hang guard: the session runs six trivial tests
    )
    assert p.returncode == 1, p.stdout + p.stderr  # test_alpha_bad fails
    report = json.loads(out.read_text())
    for check, _, _ in specs:
        alone = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q"]
            + [a for a in shlex.split(check.split(":", 2)[2]) if a != "-q"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,  # a hang guard
        )
        own = sorted(ln for ln in alone.stdout.splitlines() if "::" in ln)
        assert own and sorted(report["selected"][check]) == own, check
    results = tool.control_results(specs, report, "log")
    assert [r.outcome for r in results] == list(checks.values())
    failed = next(r for r in results if r.outcome == "failed")
    assert failed.failing == ["tests/test_x.py::test_alpha_bad"]
