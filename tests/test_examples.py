# SPDX-License-Identifier: Apache-2.0
"""The examples, built as an extension author builds them: from the wheel.

tools/examples.py builds this work tree's wheel, installs it into a fresh
virtual environment, and builds every ``examples/*/`` against that package
(``find_package(deferred_cleanup CONFIG)`` with ``get_cmake_dir()``), then runs
the example's tests.  A header or CMake file missing from the wheel fails it;
two tests remove one of each on purpose.  ``cmake --install`` of the source
tree gives the same package (the last test).

Marker ``examples``: one run-once check (tools/matrix.py ONCE_CHECKS), on
cp312-pyenv: the wheel, the environment and the CMake builds cost about a CPU
minute per example, and an example's Python is the same C API on every
version.  The wheel reuses the interpreter's incremental build directory
(build/<interpreter>) when tools/matrix.py names the interpreter.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import examples as runner  # noqa: E402  (tools/examples.py)


def _build_dir(tmp: Path) -> Path:
    """scikit-build-core's build directory for the wheel: DC_EXAMPLES_BUILD_DIR if
    set, else the matrix interpreter's own (incremental), else a fresh one."""
    if os.environ.get("DC_EXAMPLES_BUILD_DIR"):
        return Path(os.environ["DC_EXAMPLES_BUILD_DIR"])
    name = os.environ.get("DC_INTERPRETER_NAME")
    return REPO / "build" / name if name else tmp / "skbuild"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    if shutil.which("cmake") is None:
        pytest.skip("cmake not found: the wheel and the examples are built with CMake")
    tmp = tmp_path_factory.mktemp("wheel")
    return runner.build_wheel(tmp / "dist", _build_dir(tmp))


@pytest.mark.examples
@pytest.mark.timeout(1800)  # hang guard only: a wheel, an environment, one build per example
@pytest.mark.parametrize("example", [p.name for p in runner.examples()])
def test_example_builds_against_the_installed_wheel_and_its_tests_pass(wheel, example, tmp_path):
    py = runner.fresh_env(wheel, tmp_path / "venv")
    r = runner.build_and_test(REPO / "examples" / example, py, tmp_path / "work")
    assert r.ok, f"{example}: {r.step} failed\n{r.log.read_text()[-6000:]}"
    # Built from the wheel's package, never the source tree.
    cache = (tmp_path / "work" / "build" / "CMakeCache.txt").read_text()
    line = next(ln for ln in cache.splitlines() if ln.startswith("deferred_cleanup_DIR"))
    assert str(tmp_path / "venv") in line and str(REPO / "include") not in cache, line


@pytest.mark.examples
@pytest.mark.timeout(900)  # hang guard only
@pytest.mark.parametrize("what,step", [("cmake", "configure"), ("header", "build")])
def test_a_file_missing_from_the_wheel_fails_the_example(wheel, what, step, tmp_path):
    py = runner.fresh_env(wheel, tmp_path / "venv")
    runner.break_install(py, what)
    r = runner.build_and_test(REPO / "examples" / "core_only", py, tmp_path / "work")
    assert not r.ok and r.step == step, f"{what} removed: {r.step}\n{r.log.read_text()[-3000:]}"


@pytest.mark.examples
@pytest.mark.timeout(900)  # hang guard only
def test_cmake_install_of_the_source_tree_gives_the_wheels_package(wheel, tmp_path):
    """Same headers and CMake files as the wheel, and find_package works from there."""
    b, prefix = tmp_path / "b", tmp_path / "prefix"
    for cmd in (
        ["cmake", "-S", str(REPO), "-B", str(b), "-DDC_PACKAGE_ONLY=ON"],
        ["cmake", "--install", str(b), "--prefix", str(prefix)],
    ):
        p = subprocess.run(cmd, capture_output=True, text=True)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    import zipfile

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


def test_examples_run_once_in_make_test():
    """The run-once check exists, with its marker and its reason for plain pytest."""
    import importlib.util

    import conftest

    spec = importlib.util.spec_from_file_location(
        "dc_matrix_examples", REPO / "tools" / "matrix.py"
    )
    matrix = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = matrix  # dataclasses look their module up there
    spec.loader.exec_module(matrix)
    assert ("examples", "cp312-pyenv", "examples") in matrix.ONCE_CHECKS
    assert "examples" in conftest.MATRIX_ONLY
    assert "examples:" in (REPO / "pyproject.toml").read_text()
    assert runner.examples(), "no example under examples/"
