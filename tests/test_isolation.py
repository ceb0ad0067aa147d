# SPDX-License-Identifier: Apache-2.0
"""No process-wide symbol is shared between two extensions that use the core.

Two tiny extensions are built from one source (tests/isolation/ext.cpp)
against ``include/`` with g++'s default visibility, the way an author who
never heard of ``-fvisibility=hidden`` builds them, and loaded into one
interpreter (CPython loads extensions with RTLD_LOCAL).  A C++17 inline
variable or variable template with default visibility would be an
STB_GNU_UNIQUE symbol, bound process-wide by the dynamic loader whatever
RTLD_LOCAL says: the second extension's published queue would be the
first's (include/deferred_cleanup/visibility.hpp).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "tests" / "isolation" / "ext.cpp"
N = 1000  # items per module and run: enough that half through each path is many


def _compiler() -> str:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler (g++ or c++) on PATH: the test builds two extensions")
    return cxx


def _build(name: str, out: Path) -> Path:
    """Build tests/isolation/ext.cpp as the extension ``name`` in ``out``.

    :param name: the module name (its PyInit_ symbol)
    :param out: the directory to write it to
    :returns: the extension's path
    :raises AssertionError: when the compiler fails (its output in the message)
    """
    so = out / f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}"
    cmd = [
        _compiler(),
        "-std=c++17",
        "-O0",  # fastest to build, and it keeps every object the code names
        "-fPIC",
        "-shared",
        "-pthread",
        "-Wall",
        "-Wextra",
        "-Werror",
        f"-DDC_EXT_NAME={name}",
        f"-I{REPO / 'include'}",
        f"-I{sysconfig.get_paths()['include']}",
        str(SOURCE),
        "-o",
        str(so),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)  # hang guard only
    assert p.returncode == 0, f"{' '.join(cmd)}\n{p.stderr[-4000:]}"
    return so


@pytest.fixture(scope="module")
def two_extensions(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("isolation")
    for name in ("iso_a", "iso_b"):
        _build(name, out)
    return out


def _tool(*args: str) -> str:
    exe = shutil.which(args[0])
    if exe is None:
        pytest.skip(f"{args[0]} (binutils) not found: it reads the extension's symbol table")
    return subprocess.run([exe, *args[1:]], capture_output=True, text=True, check=True).stdout


def test_no_gnu_unique_symbol_in_an_extension_built_with_default_visibility(two_extensions):
    for so in sorted(two_extensions.glob("iso_*")):
        syms = _tool("readelf", "--dyn-syms", "-W", str(so))
        unique = [ln for ln in syms.splitlines() if " UNIQUE " in ln]
        assert unique == [], f"{so.name}: STB_GNU_UNIQUE symbols, shared process-wide: {unique}"
        # No object of the core in the dynamic symbol table at all (data, bss, read-only).
        objects = [
            ln
            for ln in _tool("nm", "-DC", "--defined-only", str(so)).splitlines()
            if "deferred_cleanup" in ln and ln.split()[1] in "uVvBbDdRrGgSs"
        ]
        assert objects == [], f"{so.name}: objects of the core exported: {objects}"


def test_two_extensions_in_one_process_each_drain_their_own_items(two_extensions):
    script = textwrap.dedent(
        f"""
        import json, sys
        sys.path.insert(0, {str(two_extensions)!r})
        import iso_a, iso_b
        a1 = iso_a.run({N})
        b1 = iso_b.run({N})
        a2 = iso_a.run({N})
        print(json.dumps({{"a1": a1, "b1": b1, "a2": a2}}))
        """
    )
    p = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )  # hang guard only
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(p.stdout.strip().splitlines()[-1])
    # (cleaned so far in that module, the published queue is the module's own, off-main count)
    assert r["a1"] == [N, True, 0], r
    assert r["b1"] == [N, True, 0], (
        f"the second extension's items went elsewhere: {r} (a shared published queue?)"
    )
    assert r["a2"] == [2 * N, True, 0], r
