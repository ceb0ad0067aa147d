# SPDX-License-Identifier: Apache-2.0
"""A production build of deferred_cleanup._native has no test hook.

The `_test_` hooks (reference/testing/test_hooks.cpp) and the host's calls
into them (the gate hook Host::in_gate, the backstop's release of a held
producer, the at-fork reset of the hooks, the DC_TEST_FILL_PY_ATEXIT switch)
are compiled only with the CMake option DC_TEST_HOOKS, which tools/matrix.py
turns on.  This test builds the module as a user's ``pip install .`` does
(option OFF) with CMake into a temporary directory, and checks what the
shared object holds: no symbol of a hook (``nm``), not the environment
variable's name (so not the branch that reads it), and ``TEST_HOOKS`` False.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# The build takes about a minute idle, several with both cores busy: a hang guard.
pytestmark = [pytest.mark.production, pytest.mark.timeout(1800)]

#: Names of the hooks' functions (substrings of demangled symbols).
HOOK_SYMBOLS = [
    "test_hook_in_gate",
    "test_hooks_at_backstop",
    "test_hooks_after_fork",
    "test_gate_hook_passes",
    "register_test_hooks",
    "test_noop_exit_callback",
    "lose_or_add_pending_call",
]
#: Strings only a hook's code holds: the fill switch, the hooks' Python names.
HOOK_STRINGS = [b"DC_TEST_FILL_PY_ATEXIT", b"_test_arm_gate_hold", b"_test_lose_calls"]


@pytest.fixture(scope="module")
def production_so(tmp_path_factory) -> Path:
    """Build _native with DC_TEST_HOOKS=OFF (CMake, this interpreter, RelWithDebInfo).

    Returns:
        Path: the built shared object.
    """
    for tool in ("cmake", "nm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed here")
    import pybind11

    bdir = tmp_path_factory.mktemp("production")
    configure = [
        "cmake",
        "-S",
        str(REPO),
        "-B",
        str(bdir),
        "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
        "-DDC_TEST_HOOKS=OFF",
        f"-DPython_EXECUTABLE={sys.executable}",
        f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
    ]
    for argv in (configure, ["cmake", "--build", str(bdir), "--target", "_native", "-j2"]):
        p = subprocess.run(argv, capture_output=True, text=True, timeout=1800)  # hang guard
        assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    (so,) = [p for p in bdir.glob("_native*.so")]
    return so


def test_production_build_has_no_hook_symbol(production_so):
    nm = subprocess.run(["nm", "-C", str(production_so)], capture_output=True, text=True)
    assert nm.returncode == 0, nm.stderr
    # A control: nm sees the host's own symbols in this object (debug info kept).
    assert "backstop" in nm.stdout, "nm shows no host symbol: the check would be empty"
    found = [s for s in HOOK_SYMBOLS if s in nm.stdout]
    assert found == [], f"test-hook symbols in a production build: {found}"


def test_production_build_has_no_hook_branch(production_so):
    data = production_so.read_bytes()
    assert b"DC_STATS_AT_EXIT" in data, "control: the production getenv name is in the object"
    found = [s.decode() for s in HOOK_STRINGS if s in data]
    assert found == [], f"test-hook strings (so their branches) in a production build: {found}"


def test_production_build_says_it_has_no_hooks(production_so, tmp_path):
    # Import the built module on its own (not the installed test build).
    pkg = tmp_path / "deferred_cleanup"
    shutil.copytree(REPO / "reference" / "python" / "deferred_cleanup", pkg)
    shutil.copy(production_so, pkg / production_so.name)
    code = (
        "import deferred_cleanup as dc, json; "
        "print(json.dumps([dc._native.__file__, dc._native.TEST_HOOKS, "
        "hasattr(dc._native, '_test_lose_calls')]))"
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    where, hooks, has_lose = __import__("json").loads(p.stdout.strip().splitlines()[-1])
    assert Path(where).parent == pkg
    assert hooks is False and has_lose is False
