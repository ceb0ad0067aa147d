# SPDX-License-Identifier: Apache-2.0
"""The examples/ extensions, built against this source tree, pass their tests.

Each example's CMakeLists.txt is written as a user writes it
(``find_package(deferred_cleanup CONFIG REQUIRED)``, target
``deferred_cleanup::cpython``).  This test installs the tree's CMake package
with ``cmake --install`` (``-DDC_PACKAGE_ONLY=ON``) into its temporary
directory, builds each example with this interpreter against that package
(the config and cmake/deferred_cleanupHost.cmake the wheel ships) and runs the
example's own tests/ with it.  tests/test_examples.py does the same from the
wheel, once.  Mutants of the host library (src/cpython/) are killed here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = ["c_minimal", "c_threadpool", "pybind11_pool"]

# Building the examples takes about 90 s idle, several minutes with both cores
# busy: a hang guard, not a speed requirement.
pytestmark = pytest.mark.timeout(1800)


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=900, **kw)  # hang guard
    assert p.returncode == 0, f"{argv}:\n{p.stdout[-6000:]}\n{p.stderr[-6000:]}"
    return p


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """Each example built with this interpreter against the source tree.

    Returns:
        dict[str, Path]: example name -> its CMake build directory (the module in it).
    """
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed here")
    import pybind11  # the pybind11 example's find_package(pybind11 CONFIG)

    tmp = tmp_path_factory.mktemp("examples")
    _run(["cmake", "-S", str(REPO), "-B", str(tmp / "package"), "-DDC_PACKAGE_ONLY=ON"])
    _run(["cmake", "--install", str(tmp / "package"), "--prefix", str(tmp / "prefix")])
    cfg = tmp / "prefix" / "share" / "cmake" / "deferred_cleanup"
    out = {}
    for name in EXAMPLES:
        bdir = tmp / name
        _run(
            [
                "cmake",
                *("-S", str(REPO / "examples" / name), "-B", str(bdir)),
                "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                f"-DPython_EXECUTABLE={sys.executable}",
                f"-Ddeferred_cleanup_DIR={cfg}",
                f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
                "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror",
                "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Werror",
            ]
        )
        _run(["cmake", "--build", str(bdir), "-j2"])
        out[name] = bdir
    return out


def _env(*dirs: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, dirs)))
    env.pop("DC_SESSION_REPORT", None)
    return env


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_builds_against_the_source_tree_and_passes_its_tests(name, built, tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        + [str(REPO / "examples" / name / "tests")],
        capture_output=True,
        text=True,
        env=_env(built[name]),
        cwd=tmp_path,
        timeout=900,  # hang guard
    )
    assert p.returncode == 0, p.stdout[-8000:] + p.stderr[-4000:]
    assert " passed" in p.stdout and "skipped" not in p.stdout, p.stdout[-2000:]


def test_two_extensions_in_one_process_each_have_their_own_host(built):
    # Each module exports only its PyInit_ function: the library's symbols are
    # hidden, so two extensions that both use it share nothing.
    # (Instances of the standard library's templates keep default visibility
    # in libstdc++; they are not the library's.)
    for bdir in built.values():
        (so,) = bdir.glob("*.so")
        nm = subprocess.run(
            ["nm", "-DC", "--defined-only", str(so)], capture_output=True, text=True
        )
        assert nm.returncode == 0, nm.stderr
        exported = [line.split(maxsplit=2)[-1] for line in nm.stdout.splitlines() if line.strip()]
        ours = [e for e in exported if "deferred_cleanup" in e or e.startswith(("dc_", "Py"))]
        assert ours == [f"PyInit_{so.name.split('.')[0]}"], ours
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
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=_env(*built.values()),
        timeout=300,  # hang guard
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["released"] == 500 and out["seen"] == 500 and out["main"]
    # dc_threadpool's host counts its own 500 hand-offs, not dc_minimal's.
    assert out["c"]["handed_off"] == 500
    assert out["c"]["released_on_main"] == 500
