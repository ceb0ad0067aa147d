# SPDX-License-Identifier: Apache-2.0
"""The examples, built as an extension author builds them: from the wheel.

tools/examples.py builds this work tree's wheel, installs it into a fresh
virtual environment, and builds every ``examples/*/`` against that package
(``find_package(deferred_cleanup CONFIG)`` with ``get_cmake_dir()``, strict
warnings), then runs the example's tests, which must all pass with none
skipped.  Two extensions built this way share nothing in one process.  A
header or CMake file missing from the wheel fails it; two tests remove one of
each on purpose.  ``cmake --install`` of the source tree gives the same
package (the last test).

Marker ``examples``: in every interpreter's job of ``make test`` (the examples'
tests check that interpreter's pending calls, exit and fork), and only under
tools/matrix.py or tools/mutate.py (DC_MATRIX=1; plain pytest skips them with
tests/conftest.py's reason).  The three tests of the package's files (a
missing header, a missing CMake file, ``cmake --install``), which no
interpreter changes, also carry ``examples_package``: they run once, in the
run-once check of that name on cp312-pyenv, not in every job.  The wheel
reuses the interpreter's incremental build directory, configured as there
(``DC_TEST_HOOKS=ON``), so it compiles nothing; the fresh environment, the
example builds (through ccache where the host has it) and their logs live in
``build/examples/<interpreter>/``, at the same paths on every run, so that
ccache finds what an earlier run compiled.
The mutants of the host library (src/cpython/) are killed here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import examples as runner  # noqa: E402  (tools/examples.py)
from matrix import CXX_FLAGS_VAR, TEST_CXX_FLAGS  # noqa: E402  (tools/matrix.py)

#: The interpreter's name in the matrix (tools/matrix.py and tools/mutate.py set it).
NAME = os.environ.get("DC_INTERPRETER_NAME") or ""
#: This interpreter's directory for the fresh environment and the example builds.
WORK = REPO / "build" / "examples" / (NAME or sysconfig.get_config_var("SOABI"))
EXAMPLES = [p.name for p in runner.examples()]


def _build_dir(tmp: Path) -> tuple[Path, bool, str]:
    """scikit-build-core's build directory for the wheel, and whether it is a test build.

    The first of these that is a CMake tree of this work tree (its
    CMAKE_HOME_DIRECTORY is REPO): DC_EXAMPLES_BUILD_DIR (tools/matrix.py sets
    it for each interpreter's job: build/KEY, which for ``--python PATH`` is
    not build/NAME); the interpreter's incremental tree, which tools/matrix.py
    (``build/NAME``) or, in its scratch copy, tools/mutate.py
    (``build/ext-NAME``) made with DC_TEST_HOOKS=ON.  Else a fresh one (a
    production configuration: the whole extension is compiled).

    Returns:
        tuple[Path, bool, str]: the directory; True when the wheel must be
        configured with DC_TEST_HOOKS=ON to match it; and the compiler flags
        it holds (CXX_FLAGS_VAR: tools/mutate.py's -O0, the matrix's -O2),
        which the wheel keeps (TEST_CXX_FLAGS for a fresh directory).  With
        both matched the wheel compiles nothing.
    """
    candidates = (
        [Path(os.environ["DC_EXAMPLES_BUILD_DIR"])]
        if os.environ.get("DC_EXAMPLES_BUILD_DIR")
        else []
    )
    if NAME:
        candidates += [REPO / "build" / NAME, REPO / "build" / f"ext-{NAME}"]
    for d in candidates:
        cache = d / "CMakeCache.txt"
        text = cache.read_text(errors="replace") if cache.is_file() else ""
        if f"CMAKE_HOME_DIRECTORY:INTERNAL={REPO}\n" in text:
            flags = re.search(rf"^{CXX_FLAGS_VAR}:STRING=(.*)$", text, re.M)
            return d, "DC_TEST_HOOKS:BOOL=ON" in text, flags.group(1) if flags else TEST_CXX_FLAGS
    return tmp / "skbuild", False, TEST_CXX_FLAGS


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """This work tree's wheel (built once per module)."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake not found: the wheel and the examples are built with CMake")
    build_dir, test_hooks, cxx_flags = _build_dir(tmp_path_factory.mktemp("wheel"))
    return runner.build_wheel(WORK / "dist", build_dir, test_hooks=test_hooks, cxx_flags=cxx_flags)


@pytest.fixture(scope="module")
def installed(wheel) -> str:
    """The Python of a fresh virtual environment with only the wheel installed."""
    return runner.fresh_env(wheel, WORK / "venv")


@pytest.fixture(scope="module")
def built(installed) -> dict[str, runner.Result]:
    """Every example configured and built against the installed package."""
    return {n: runner.build(REPO / "examples" / n, installed, WORK / "work" / n) for n in EXAMPLES}


# A hang guard only: the wheel, the environment and the example builds
# happen in the first test's setup (about a CPU minute from an empty ccache).
HANG_GUARD = pytest.mark.timeout(1800)


@pytest.mark.examples
@HANG_GUARD
@pytest.mark.parametrize("example", EXAMPLES)
def test_example_builds_against_the_installed_wheel_and_its_tests_pass(built, installed, example):
    b = built[example]
    assert b.ok, f"{example}: {b.step} failed\n{b.log.read_text()[-6000:]}"
    # Built from the wheel's package, never the source tree.
    cache = (b.log.parent / "build" / "CMakeCache.txt").read_text()
    line = next(ln for ln in cache.splitlines() if ln.startswith("deferred_cleanup_DIR"))
    assert str(WORK / "venv") in line and str(REPO / "include") not in cache, line
    r = runner.run_tests(REPO / "examples" / example, installed, b)
    assert r.ok, (
        f"{example}: {r.passed} passed, {r.skipped} skipped (none may skip)\n"
        f"{r.log.read_text()[-8000:]}"
    )


@pytest.mark.examples
@HANG_GUARD
def test_two_extensions_in_one_process_each_have_their_own_host(built, installed):
    # Each module exports only its PyInit_ function: the library's symbols are
    # hidden, so two extensions that both use it share nothing.  (Instances of
    # the standard library's templates keep default visibility in libstdc++;
    # they are not the library's.)
    for name, b in built.items():
        assert b.ok, f"{name}: {b.step} failed\n{b.log.read_text()[-3000:]}"
        (so,) = (b.log.parent / "build").glob("*.so")
        nm = subprocess.run(
            ["nm", "-DC", "--defined-only", str(so)], capture_output=True, text=True
        )
        assert nm.returncode == 0, nm.stderr
        exported = [line.split(maxsplit=2)[-1] for line in nm.stdout.splitlines() if line.strip()]
        ours = [e for e in exported if "deferred_cleanup" in e or e.startswith(("dc_", "Py"))]
        assert ours == [f"PyInit_{so.name.split('.')[0]}"], (name, ours)
    code = """if True:
        import json, threading, time, weakref
        import dc_minimal, dc_threadpool
        released = []
        class P:
            pass
        for _ in range(500):
            p = P()
            weakref.finalize(p, lambda: released.append(threading.get_ident()))
            dc_minimal.release_later(p)
            del p
        seen = []
        dc_threadpool.complete([object() for _ in range(500)], seen.append, threads=4)
        end = time.monotonic() + 60  # hang guard
        while (len(released) < 500 or len(seen) < 500) and time.monotonic() < end:
            time.sleep(0.001)
        print(json.dumps({"released": len(released), "seen": len(seen),
                          "main": set(released) == {threading.main_thread().ident},
                          "c": dc_threadpool.counters()}))
    """
    dirs = [built[n].log.parent / "build" for n in ("c_minimal", "c_threadpool")]
    p = subprocess.run(
        [installed, "-c", code],
        capture_output=True,
        text=True,
        env=dict(runner.venv_env(), PYTHONPATH=os.pathsep.join(map(str, dirs))),
        timeout=300,  # hang guard
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["released"] == 500 and out["seen"] == 500 and out["main"], out
    # dc_threadpool's host counts its own 500 hand-offs, not dc_minimal's.
    assert out["c"]["handed_off"] == 500, out
    assert out["c"]["released_on_main"] == 500, out


@pytest.mark.examples
@pytest.mark.examples_package
@HANG_GUARD
@pytest.mark.parametrize("what,step", [("cmake", "configure"), ("header", "build")])
def test_a_file_missing_from_the_wheel_fails_the_example(wheel, what, step, tmp_path):
    py = runner.fresh_env(wheel, tmp_path / "venv")
    runner.break_install(py, what)
    r = runner.build_and_test(REPO / "examples" / "core_only", py, tmp_path / "work")
    assert not r.ok and r.step == step, f"{what} removed: {r.step}\n{r.log.read_text()[-3000:]}"


@pytest.mark.examples
@pytest.mark.examples_package
@HANG_GUARD
def test_cmake_install_of_the_source_tree_gives_the_wheels_package(wheel, tmp_path):
    """Same headers and CMake files as the wheel, and find_package works from there."""
    b, prefix = tmp_path / "b", tmp_path / "prefix"
    for cmd in (
        ["cmake", "-S", str(REPO), "-B", str(b), "-DDC_PACKAGE_ONLY=ON"],
        ["cmake", "--install", str(b), "--prefix", str(prefix)],
    ):
        p = subprocess.run(cmd, capture_output=True, text=True)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    names = zipfile.ZipFile(wheel).namelist()
    # The host library's sources: deferred_cleanup/src/ in the wheel,
    # share/deferred_cleanup/src/ from cmake --install (cmake/package.cmake).
    in_wheel = sorted(
        "share/deferred_cleanup/" + n[len("deferred_cleanup/") :]
        if n.startswith("deferred_cleanup/src/")
        else n[len("deferred_cleanup/") :]
        for n in names
        if n.startswith(
            ("deferred_cleanup/include/", "deferred_cleanup/share/", "deferred_cleanup/src/")
        )
    )
    installed = sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*") if p.is_file())
    assert in_wheel == installed, f"wheel: {in_wheel}\ncmake --install: {installed}"
    # A consumer: find_package(deferred_cleanup CONFIG) from the prefix, core target only.
    src = tmp_path / "consumer"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.25)\nproject(consumer LANGUAGES CXX)\n"
        "find_package(deferred_cleanup 0.1 CONFIG REQUIRED)\n"
        "add_executable(consumer main.cpp)\n"
        "target_link_libraries(consumer PRIVATE deferred_cleanup::core)\n"
    )
    (src / "main.cpp").write_text(
        '#include "deferred_cleanup/deferred_cleanup.hpp"\n'
        "int main() { deferred_cleanup::Host h; deferred_cleanup::Queue q(&h);\n"
        "  return static_cast<int>(deferred_cleanup::drain_all(q)); }\n"
    )
    for cmd in (
        ["cmake", "-S", str(src), "-B", str(src / "b"), f"-DCMAKE_PREFIX_PATH={prefix}"],
        ["cmake", "--build", str(src / "b")],
        [str(src / "b" / "consumer")],
    ):
        p = subprocess.run(cmd, capture_output=True, text=True)
        assert p.returncode == 0, " ".join(cmd) + "\n" + p.stdout[-2000:] + p.stderr[-2000:]


def test_examples_run_in_every_interpreters_job():
    """The wheel route is part of each interpreter's job, and plain pytest says why it skips."""
    import importlib.util

    import conftest

    spec = importlib.util.spec_from_file_location(
        "dc_matrix_examples", REPO / "tools" / "matrix.py"
    )
    matrix = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = matrix  # dataclasses look their module up there
    spec.loader.exec_module(matrix)
    # Not a run-once check: its marker is not excluded from the per-interpreter runs.
    assert all(marker != "examples" for _, _, marker in matrix.ONCE_CHECKS)
    # What does not depend on the interpreter (the package's files) runs once.
    assert ("examples-package", "cp312-pyenv", "examples_package") in matrix.ONCE_CHECKS
    assert "examples_package:" in (REPO / "pyproject.toml").read_text()
    assert "examples" in conftest.MATRIX_ONLY
    assert "examples:" in (REPO / "pyproject.toml").read_text()
    assert EXAMPLES, "no example under examples/"
