# SPDX-License-Identifier: Apache-2.0
"""The library as others take it: its licence, its version, the C++ standard
its headers need.

* LICENSE is the Apache License 2.0 that pyproject.toml names, and every source
  file says so in an SPDX line, so a file vendored alone still carries it.
* include/deferred_cleanup/version.hpp states the version pyproject.toml
  states (the one place each number lives is pyproject.toml; the header
  repeats it for the preprocessor, and this test keeps the two equal).
* Every header of the core compiles on its own as C++17, with no Python.h and
  no CUDA header on the include path: what README promises.

Marker ``format``: none of this depends on the interpreter (git, the files and
g++ only), so it runs once, in the matrix's ``format`` check with
tests/test_format.py, not once per interpreter (the header compile alone is
about 1.3 CPU-seconds a run).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CORE = REPO / "include" / "deferred_cleanup"
SPDX = "SPDX-License-Identifier: Apache-2.0"
# What counts as a source file: code in any language the repository builds or runs.
SOURCE_RE = re.compile(r"\.(cpp|hpp|h|c|py|sh|cmake|pxd|pyx)$|(^|/)CMakeLists\.txt$|(^|/)Makefile$")
# The comparison policies and the reference module's driver interface are not the core; nor
# is cpython/, the CPython host's headers (they include Python.h).
NOT_CORE = {"comparison/policies.hpp", "driver.hpp"}

pytestmark = pytest.mark.format


def _pyproject_version() -> str:
    m = re.search(r'^version = "([^"]+)"$', (REPO / "pyproject.toml").read_text(), re.M)
    assert m, "pyproject.toml: no [project] version line"
    return m.group(1)


def _tracked_sources() -> list[str]:
    git = shutil.which("git")
    if git is None or not (REPO / ".git").exists():
        pytest.skip("git is not available here: the file list is `git ls-files`")
    p = subprocess.run([git, "-C", str(REPO), "ls-files"], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"git ls-files failed here: {p.stderr.strip()[:200]}")
    return [f for f in p.stdout.splitlines() if SOURCE_RE.search(f) and (REPO / f).is_file()]


def test_license_is_the_apache_license_pyproject_names():
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert re.search(
        r'^license = \{ text = "Apache-2.0" \}$', (REPO / "pyproject.toml").read_text(), re.M
    )


def _without_spdx(root: Path, files: list[str]) -> list[str]:
    """The files under ``root`` with no SPDX line among their first three lines."""
    return [f for f in files if SPDX not in "".join((root / f).read_text().splitlines(True)[:3])]


def test_every_source_file_has_an_spdx_line():
    files = _tracked_sources()
    assert len(files) > 100, f"only {len(files)} source files found: the pattern is wrong"
    missing = _without_spdx(REPO, files)
    assert missing == [], f"no '{SPDX}' in the first three lines of: {missing}"


def test_spdx_check_can_fail(tmp_path):
    """The check finds a file without the line, and one with it on line four."""
    (tmp_path / "x.cpp").write_text("// x.cpp: no licence line\nint x;\n")
    (tmp_path / "y.py").write_text(f"#!/usr/bin/env python3\n# y\n# y\n# {SPDX}\n")
    (tmp_path / "z.sh").write_text(f"#!/usr/bin/env bash\n# {SPDX}\n")
    assert _without_spdx(tmp_path, ["x.cpp", "y.py", "z.sh"]) == ["x.cpp", "y.py"]


def test_version_macros_match_pyproject():
    text = (CORE / "version.hpp").read_text()
    nums = {
        part: int(re.search(rf"#define DEFERRED_CLEANUP_VERSION_{part} (\d+)", text).group(1))
        for part in ("MAJOR", "MINOR", "PATCH")
    }
    string = re.search(r'#define DEFERRED_CLEANUP_VERSION_STRING "([^"]+)"', text).group(1)
    want = _pyproject_version()
    assert string == want, f"version.hpp says {string}, pyproject.toml {want}"
    assert f"{nums['MAJOR']}.{nums['MINOR']}.{nums['PATCH']}" == want


def _core_headers() -> list[str]:
    return sorted(
        str(p.relative_to(CORE.parent))
        for p in CORE.rglob("*.hpp")
        if str(p.relative_to(CORE)) not in NOT_CORE and p.relative_to(CORE).parts[0] != "cpython"
    )


def test_core_headers_include_no_python_and_no_cuda():
    for h in _core_headers():
        text = (CORE.parent / h).read_text()
        found = re.findall(r'#\s*include\s*[<"]((?:Python|cuda|pybind11|nanobind)[^>"]*)[>"]', text)
        assert found == [], f"{h} includes {found}: the core is plain C++"


def test_every_core_header_compiles_alone_as_cxx17(tmp_path):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler (g++ or c++) on PATH")
    headers = _core_headers()
    assert "deferred_cleanup/deferred_cleanup.hpp" in headers and len(headers) >= 12, headers
    units = []
    for i, h in enumerate(headers):
        tu = tmp_path / f"tu{i}.cpp"
        tu.write_text(f'#include "{h}"\n#include "{h}"\n')  # alone, and include-guarded
        units.append(str(tu))
    flags = ["-std=c++17", "-pedantic", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"]
    # Only include/ on the path: no Python, no CUDA, no test directory.
    p = subprocess.run(
        [cxx, *flags, f"-I{REPO / 'include'}", *units], capture_output=True, text=True, timeout=600
    )  # hang guard only
    assert p.returncode == 0, p.stderr[-4000:]
