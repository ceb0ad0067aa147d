"""The examples/ extensions, built against this source tree, pass their tests.

Each example's CMakeLists.txt is written as a user writes it
(``find_package(deferred_cleanup CONFIG REQUIRED)``, target
``deferred_cleanup::cpython``).  Until the CMake package is installed by the
wheel, this test gives find_package a config made here, in the test's
temporary directory, that names the source tree's include/ and src/cpython/
(the same target properties as the top-level CMakeLists.txt), builds the
example with this interpreter and runs the example's own tests/ with it.
Mutants of the host library (src/cpython/) are killed here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = ["c_minimal", "c_threadpool"]

CONFIG = """\
set(_dc_src "{repo}")
if(NOT TARGET deferred_cleanup::core)
  add_library(deferred_cleanup::core INTERFACE IMPORTED)
  set_target_properties(deferred_cleanup::core PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${{_dc_src}}/include;${{_dc_src}}/reference/include"
    INTERFACE_COMPILE_FEATURES cxx_std_17)
  file(GLOB _dc_cpython_sources "${{_dc_src}}/src/cpython/*.cpp")
  add_library(deferred_cleanup::cpython INTERFACE IMPORTED)
  set_target_properties(deferred_cleanup::cpython PROPERTIES
    INTERFACE_LINK_LIBRARIES deferred_cleanup::core
    INTERFACE_SOURCES "${{_dc_cpython_sources}}"
    INTERFACE_COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CXX>:-fvisibility=hidden>")
endif()
"""


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=900, **kw)  # hang guard
    assert p.returncode == 0, f"{argv}:\n{p.stdout[-6000:]}\n{p.stderr[-6000:]}"
    return p


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_builds_against_the_source_tree_and_passes_its_tests(name, tmp_path):
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed here")
    cfg = tmp_path / "config"
    cfg.mkdir()
    (cfg / "deferred_cleanupConfig.cmake").write_text(CONFIG.format(repo=REPO.as_posix()))
    src, bdir = REPO / "examples" / name, tmp_path / "build"
    _run(
        [
            "cmake",
            *("-S", str(src), "-B", str(bdir)),
            "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-Ddeferred_cleanup_DIR={cfg}",
            "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror",
            "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Werror",
        ]
    )
    _run(["cmake", "--build", str(bdir), "-j2"])
    env = dict(os.environ, PYTHONPATH=str(bdir))
    env.pop("DC_SESSION_REPORT", None)
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(src / "tests")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=900,  # hang guard
    )
    assert p.returncode == 0, p.stdout[-8000:] + p.stderr[-4000:]
    assert " passed" in p.stdout and "skipped" not in p.stdout, p.stdout[-2000:]
