#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Build every example against the installed wheel and run its tests.

What an extension author does, from nothing but the wheel:

1. build the wheel of this work tree once (``pip wheel``, scikit-build-core,
   the interpreter's own incremental build directory);
2. make a fresh virtual environment (``venv --without-pip``: nothing in it
   but the interpreter) and install the wheel there with the tools
   environment's pip (``pip --python``, ``--no-index --no-deps``: the package
   comes from the wheel and nowhere else);
3. for every ``examples/<name>/``: configure it with CMake against the
   installed package, ``find_package(deferred_cleanup CONFIG)`` with
   ``deferred_cleanup_DIR`` from ``deferred_cleanup.get_cmake_dir()`` of the
   fresh environment (never the source tree), build it with
   ``-Wall -Wextra -Werror`` (the host library's sources are compiled in the
   user's build, so they must be warning-free there), and run its ``tests/``
   with that environment's Python: every test must pass and none may skip.

The fresh environment gets the test tools (pytest, pybind11) through one
``.pth`` line naming the interpreter's matrix environment, appended after its
own site-packages, so ``import deferred_cleanup`` is the wheel's.  A header or
CMake file missing from the wheel fails step 3 (``--break`` shows it on
purpose).  The examples compile through ccache where it is installed (the
cache of tools/matrix.py, ``$DC_CACHE/ccache``, keyed relative to the work
tree): a second run, or another checkout's, compiles only what changed.
Standard library only; tests/test_examples.py runs it on every interpreter.

Usage::

    tools/examples.py [--out DIR] [--build-dir DIR] [--test-hooks] [--only NAME ...]
                      [--break header|cmake]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
sys.path.insert(0, str(REPO / "tools"))
# tools/matrix.py: standard library only
from matrix import (  # noqa: E402
    CCACHE_DIR,
    CCACHE_SLOPPINESS,
    TEST_CXX_FLAGS,
    build_config,
)

#: What every example is compiled with on top of its own CMakeLists.txt: the
#: host library's sources are compiled inside the user's build, so they must
#: build warning-free under a strict user's flags (a -Werror build of an
#: example found an unused variable on 3.14+ in src/cpython/exit.cpp).
STRICT_FLAGS = "-Wall -Wextra -Werror"


@dataclass
class Result:
    """One example's outcome: ``ok`` (built and its tests passed) or the step that failed."""

    name: str
    ok: bool
    step: str  # "built", "tests passed", or the failing step: "configure", "build", "tests"
    seconds: float
    log: Path
    passed: int = 0  # the example's tests that passed (junit XML); 0 before the tests step
    skipped: int = 0  # ... and that skipped: a skip fails the tests step


def examples(only: list[str] | None = None) -> list[Path]:
    """The example directories (each with a CMakeLists.txt and a tests/ directory).

    :param only: names to keep (None: all)
    :returns: the directories, sorted by name
    :raises ValueError: when a name in ``only`` is not an example
    """
    found = sorted(p.parent for p in EXAMPLES.glob("*/CMakeLists.txt"))
    if only:
        missing = set(only) - {p.name for p in found}
        if missing:
            raise ValueError(f"no such example: {', '.join(sorted(missing))}")
        found = [p for p in found if p.name in only]
    return found


def _run(cmd: list[str], log: Path, **kw) -> int:
    """Run cmd with its output appended to log; its exit status."""
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, **kw).returncode


def venv_env() -> dict[str, str]:
    """os.environ without what would put another package before the fresh
    environment's (PYTHONPATH, PYTHONHOME: tools/mutate.py points PYTHONPATH at
    its scratch build) or make a test of an example behave as a matrix job's."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    for k in ("PYTHONPATH", "PYTHONHOME", "DC_MATRIX", "DC_SESSION_REPORT"):
        env.pop(k, None)
    return env


def compiler_cache() -> dict[str, str]:
    """CMake launcher variables and ccache settings for the examples' builds, or {}.

    ccache (when this world has it: the host does, the Debian root has no
    ccache) keeps what it compiled in tools/matrix.py's cache, shared with
    the builds of ``_native`` and every checkout; CCACHE_BASEDIR makes the
    paths under this work tree (the examples, the fresh environment's headers
    and host sources) relative, so another checkout's identical unit is a hit.

    :returns: the ccache environment variables (the caller also sets CMake's
        C and C++ compiler launchers to ccache), or {} where ccache is missing
    """
    if shutil.which("ccache") is None:
        return {}
    return {
        "CCACHE_DIR": str(CCACHE_DIR),
        "CCACHE_BASEDIR": str(REPO),
        "CCACHE_NOHASHDIR": "1",
        "CCACHE_SLOPPINESS": CCACHE_SLOPPINESS,
    }


def build_wheel(
    out: Path,
    build_dir: Path,
    python: str = sys.executable,
    test_hooks: bool = False,
    cxx_flags: str = TEST_CXX_FLAGS,
) -> Path:
    """Build this work tree's wheel with ``python``'s pip (no build isolation).

    :param out: directory for the wheel (emptied first)
    :param build_dir: scikit-build-core's build directory (incremental)
    :param python: the interpreter whose environment holds scikit-build-core and pybind11
    :param test_hooks: configure with ``DC_TEST_HOOKS=ON``, as tools/matrix.py and
        tools/mutate.py configure their build directories, so that reusing one
        recompiles nothing.  It changes ``_native`` only: the package's headers,
        CMake files and host sources, all an example uses, are the same either way.
    :param cxx_flags: the build's CXX_FLAGS_VAR (default TEST_CXX_FLAGS, -O2):
        the value the reused build directory holds
        (tools/mutate.py builds its mutants at -O0), so that reusing it
        recompiles nothing.  The package's files, all an example uses, do not
        depend on it.
    :returns: the wheel's path
    :raises RuntimeError: when pip fails (the log's path in the message)
    """
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    log = out / "wheel.log"
    cmd = [python, "-m", "pip", "wheel", "-q", "--disable-pip-version-check"]
    cmd += ["--no-build-isolation", "--no-deps", "-w", str(out)]
    cmd += ["-C", f"build-dir={build_dir}", *build_config(cxx_flags)]
    if test_hooks:
        cmd += ["-C", "cmake.define.DC_TEST_HOOKS=ON"]
    cmd += [str(REPO)]
    if _run(cmd, log) != 0:
        raise RuntimeError(f"building the wheel failed: {log}")
    wheels = sorted(out.glob("*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"expected one wheel in {out}, found {[w.name for w in wheels]}")
    return wheels[0]


def fresh_env(wheel: Path, venv: Path, python: str = sys.executable) -> str:
    """A new virtual environment with the wheel installed and the test tools visible.

    :param wheel: the wheel to install
    :param venv: where to make the environment (replaced)
    :param python: the interpreter the environment is made from; its own
        environment provides pip (run with ``--python`` on the new one), pytest and pybind11
    :returns: the new environment's Python
    :raises RuntimeError: when making it or installing the wheel fails
    """
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    log = venv.parent / f"{venv.name}.log"
    log.unlink(missing_ok=True)
    # No pip of its own (ensurepip costs seconds of CPU per environment, more on a
    # debug build): the tools environment's pip installs into it (pip >= 22.3).
    if _run([python, "-m", "venv", "--without-pip", str(venv)], log, env=venv_env()) != 0:
        raise RuntimeError(f"python -m venv failed: {log}")
    py = str(venv / "bin" / "python")
    cmd = [python, "-m", "pip", "--python", py, "install", "-q", "--disable-pip-version-check"]
    cmd += ["--no-index", "--no-deps", str(wheel)]
    if _run(cmd, log, env=venv_env()) != 0:
        raise RuntimeError(f"installing the wheel failed: {log}")
    purelib = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        env=venv_env(),
    ).stdout.strip()
    tools = sysconfig.get_paths()["purelib"] if python == sys.executable else None
    if tools is None:
        tools = subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
            env=venv_env(),
        ).stdout.strip()
    # Appended after the environment's own site-packages: deferred_cleanup is the wheel's.
    Path(purelib, "_dc_test_tools.pth").write_text(tools + "\n")
    return py


def break_install(py: str, what: str) -> None:
    """Remove one file from the installed package (to show that the runner fails).

    :param py: the fresh environment's Python
    :param what: "header" (deferred_cleanup/version.hpp) or "cmake" (the package config)
    :raises ValueError: for another ``what``
    """
    code = "import deferred_cleanup as d; print(d.get_include()); print(d.get_cmake_dir())"
    inc, cmake = subprocess.run(
        [py, "-c", code], capture_output=True, text=True, check=True, env=venv_env()
    ).stdout.split()
    if what == "header":
        Path(inc, "deferred_cleanup", "version.hpp").unlink()
    elif what == "cmake":
        Path(cmake, "deferred_cleanupConfig.cmake").unlink()
    else:
        raise ValueError(f"--break: header or cmake, not {what!r}")


def build(example: Path, py: str, work: Path) -> Result:
    """Configure and build one example against the package installed for ``py``.

    :param example: the example's directory
    :param py: the fresh environment's Python
    :param work: a directory for this example's build (``work/build``) and log (replaced)
    :returns: the result: step "built", or the step that failed ("configure", "build")
    """
    t0 = time.monotonic()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log = work / "log.txt"
    build_dir = work / "build"

    def done(ok: bool, step: str) -> Result:
        return Result(example.name, ok, step, time.monotonic() - t0, log)

    cmake_dirs = subprocess.run(
        [
            py,
            "-c",
            "import deferred_cleanup as d, pybind11 as p; print(d.get_cmake_dir()); "
            "print(p.get_cmake_dir())",
        ],
        capture_output=True,
        text=True,
        env=venv_env(),
    )
    with open(log, "a") as f:
        f.write(cmake_dirs.stdout + cmake_dirs.stderr)
    if cmake_dirs.returncode != 0:
        return done(False, "configure")
    dc_dir, pybind11_dir = cmake_dirs.stdout.split()
    cache = compiler_cache()
    configure = ["cmake", "-S", str(example), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release"]
    configure += [f"-Ddeferred_cleanup_DIR={dc_dir}", f"-Dpybind11_DIR={pybind11_dir}"]
    configure += [f"-DPython_EXECUTABLE={py}", "-DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON"]
    configure += [f"-DCMAKE_C_FLAGS={STRICT_FLAGS}", f"-DCMAKE_CXX_FLAGS={STRICT_FLAGS}"]
    if cache:
        configure += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    env = dict(venv_env(), **cache)
    if _run(configure, log, env=env) != 0:
        return done(False, "configure")
    if _run(["cmake", "--build", str(build_dir), "-j", "2"], log, env=env) != 0:
        return done(False, "build")
    return done(True, "built")


def run_tests(example: Path, py: str, built: Result) -> Result:
    """Run an example's ``tests/`` with the fresh environment's Python, its module importable.

    :param example: the example's directory
    :param py: the fresh environment's Python
    :param built: what :func:`build` returned for it (its log is appended to)
    :returns: the result: "tests passed" when pytest passed with at least one test and no
        skip; else step "tests", with the counts from its JUnit XML
    """
    t0 = time.monotonic() - built.seconds
    work = built.log.parent
    xml = work / "junit.xml"
    xml.unlink(missing_ok=True)
    env = dict(venv_env(), PYTHONPATH=str(work / "build"))
    tests = [py, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--rootdir", str(example)]
    tests += ["-o", "addopts=", f"--junitxml={xml}", str(example / "tests")]
    rc = _run(tests, built.log, env=env, cwd=work / "build")
    passed = skipped = 0
    if xml.exists():
        import xml.etree.ElementTree as ET

        root = ET.parse(xml).getroot()
        for s in [root] if root.tag == "testsuite" else list(root.iter("testsuite")):
            n = int(s.get("tests", 0))
            bad = int(s.get("failures", 0)) + int(s.get("errors", 0))
            skipped += int(s.get("skipped", 0))
            passed += n - bad - int(s.get("skipped", 0))
    ok = rc == 0 and passed > 0 and skipped == 0
    return Result(
        example.name,
        ok,
        "tests passed" if ok else "tests",
        time.monotonic() - t0,
        built.log,
        passed,
        skipped,
    )


def build_and_test(example: Path, py: str, work: Path) -> Result:
    """Configure, build and test one example against the package installed for ``py``.

    :param example: the example's directory
    :param py: the fresh environment's Python
    :param work: a directory for this example's build and log
    :returns: the result (:func:`build`'s when it failed, else :func:`run_tests`')
    """
    r = build(example, py, work)
    return run_tests(example, py, r) if r.ok else r


def main(argv: list[str] | None = None) -> int:
    """Run the steps; print one line per example; exit 1 if any failed.

    :param argv: the arguments (None: sys.argv[1:])
    :returns: 0 when every example passed, 1 otherwise
    :raises SystemExit: from argparse
    """
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out", type=Path, default=REPO / "build" / "examples" / sysconfig.get_config_var("SOABI")
    )
    ap.add_argument("--build-dir", type=Path, default=None, help="scikit-build-core build dir")
    ap.add_argument(
        "--test-hooks",
        action="store_true",
        help="configure with DC_TEST_HOOKS=ON (as tools/matrix.py's build/<interpreter> is)",
    )
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--break", dest="brk", choices=("header", "cmake"), default=None)
    a = ap.parse_args(argv)
    build_dir = a.build_dir or a.out / "skbuild"
    wheel = build_wheel(a.out / "wheel", build_dir, test_hooks=a.test_hooks)
    py = fresh_env(wheel, a.out / "venv")
    if a.brk:
        break_install(py, a.brk)
    failed = 0
    for ex in examples(a.only):
        r = build_and_test(ex, py, a.out / "work" / ex.name)
        failed += not r.ok
        print(f"[examples] {r.name}: {r.step} ({r.seconds:.0f} s; log {r.log})", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
