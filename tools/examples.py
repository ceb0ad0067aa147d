#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Build every example against the installed wheel and run its tests.

What an extension author does, from nothing but the wheel:

1. build the wheel of this work tree once (``pip wheel``, scikit-build-core,
   the interpreter's own incremental build directory);
2. make a fresh virtual environment and install the wheel there (``--no-index
   --no-deps``: the package comes from the wheel and nowhere else);
3. for every ``examples/<name>/``: configure it with CMake against the
   installed package, ``find_package(deferred_cleanup CONFIG)`` with
   ``deferred_cleanup_DIR`` from ``deferred_cleanup.get_cmake_dir()`` of the
   fresh environment (never the source tree), build it, and run its
   ``tests/`` with that environment's Python.

The fresh environment gets the test tools (pytest, pybind11) through one
``.pth`` line naming the interpreter's matrix environment, appended after its
own site-packages, so ``import deferred_cleanup`` is the wheel's.  A header or
CMake file missing from the wheel fails step 3 (``--break`` shows it on
purpose).  Standard library only; tests/test_examples.py runs it.

Usage::

    tools/examples.py [--out DIR] [--build-dir DIR] [--only NAME ...] [--break header|cmake]
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


@dataclass
class Result:
    """One example's outcome: ``ok`` (built and its tests passed) or the step that failed."""

    name: str
    ok: bool
    step: str  # "tests passed", or the failing step: "configure", "build", "tests"
    seconds: float
    log: Path


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
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, **kw).returncode


def build_wheel(out: Path, build_dir: Path, python: str = sys.executable) -> Path:
    """Build this work tree's wheel with ``python``'s pip (no build isolation).

    :param out: directory for the wheel (emptied first)
    :param build_dir: scikit-build-core's build directory (incremental)
    :param python: the interpreter whose environment holds scikit-build-core and pybind11
    :returns: the wheel's path
    :raises RuntimeError: when pip fails (the log's path in the message)
    """
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    log = out / "wheel.log"
    cmd = [python, "-m", "pip", "wheel", "-q", "--disable-pip-version-check"]
    cmd += ["--no-build-isolation", "--no-deps", "-w", str(out)]
    cmd += ["-C", f"build-dir={build_dir}", "-C", "cmake.build-type=RelWithDebInfo", str(REPO)]
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
        environment's site-packages provide pytest and pybind11
    :returns: the new environment's Python
    :raises RuntimeError: when making it or installing the wheel fails
    """
    shutil.rmtree(venv, ignore_errors=True)
    log = venv.parent / f"{venv.name}.log"
    log.unlink(missing_ok=True)
    if _run([python, "-m", "venv", str(venv)], log) != 0:
        raise RuntimeError(f"python -m venv failed: {log}")
    py = str(venv / "bin" / "python")
    cmd = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    cmd += ["--no-index", "--no-deps", str(wheel)]
    if _run(cmd, log) != 0:
        raise RuntimeError(f"installing the wheel failed: {log}")
    purelib = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    tools = sysconfig.get_paths()["purelib"] if python == sys.executable else None
    if tools is None:
        tools = subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
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
        [py, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    if what == "header":
        Path(inc, "deferred_cleanup", "version.hpp").unlink()
    elif what == "cmake":
        Path(cmake, "deferred_cleanupConfig.cmake").unlink()
    else:
        raise ValueError(f"--break: header or cmake, not {what!r}")


def build_and_test(example: Path, py: str, work: Path) -> Result:
    """Configure, build and test one example against the package installed for ``py``.

    :param example: the example's directory
    :param py: the fresh environment's Python
    :param work: a directory for this example's build and log
    :returns: the result
    """
    t0 = time.monotonic()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log = work / "log.txt"
    build = work / "build"

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
    )
    with open(log, "a") as f:
        f.write(cmake_dirs.stdout + cmake_dirs.stderr)
    if cmake_dirs.returncode != 0:
        return done(False, "configure")
    dc_dir, pybind11_dir = cmake_dirs.stdout.split()
    configure = ["cmake", "-S", str(example), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"]
    configure += [f"-Ddeferred_cleanup_DIR={dc_dir}", f"-Dpybind11_DIR={pybind11_dir}"]
    configure += [f"-DPython_EXECUTABLE={py}", "-DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON"]
    if _run(configure, log) != 0:
        return done(False, "configure")
    if _run(["cmake", "--build", str(build), "-j", "2"], log) != 0:
        return done(False, "build")
    env = dict(os.environ, PYTHONPATH=str(build), PYTHONDONTWRITEBYTECODE="1")
    env.pop("DC_MATRIX", None)
    tests = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(example)]
    tests += ["-o", "addopts=", str(example / "tests")]
    if _run(tests, log, env=env, cwd=build) != 0:
        return done(False, "tests")
    return done(True, "tests passed")


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
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--break", dest="brk", choices=("header", "cmake"), default=None)
    a = ap.parse_args(argv)
    build_dir = a.build_dir or a.out / "skbuild"
    wheel = build_wheel(a.out / "wheel", build_dir)
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
