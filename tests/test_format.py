# SPDX-License-Identifier: Apache-2.0
"""One line width, kept by tools: the C++ is what clang-format makes of it
(``.clang-format``: Google's style, 100 columns) and the Python what ruff
makes of it (``pyproject.toml`` ``[tool.ruff]``: 100 columns, format and a
modest lint set).

Marker ``format``: runs once, in the matrix's ``docs`` environment (ruff is
pinned in docs/requirements.txt), through ``make test``; clang-format is
Debian's (``tools/docs.sh`` installs it with the docs' packages).  To fix
what it reports::

    clang-format -i $(git ls-files '*.cpp' '*.hpp')
    ruff format . && ruff check --fix .
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.format


def _git_files(*patterns: str) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "--", *patterns],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [f for f in out.splitlines() if (REPO / f).is_file()]


def _clang_format() -> str:
    exe = shutil.which("clang-format")
    if exe is None:
        pytest.fail(
            "clang-format not found: `make docs` (tools/docs.sh) installs Debian's clang-format"
        )
    return exe


def _ruff(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=cwd, capture_output=True, text=True
    )


def test_cpp_is_clang_formatted():
    files = _git_files("*.cpp", "*.hpp", "*.h")
    assert files, "no C++ file found"
    p = subprocess.run(
        [_clang_format(), "--dry-run", "-Werror", *files], cwd=REPO, capture_output=True, text=True
    )
    bad = sorted({line.split(":", 1)[0] for line in p.stderr.splitlines() if ": error:" in line})
    assert p.returncode == 0, (
        f"clang-format would change {len(bad)} file(s): {', '.join(bad)}\n"
        f"fix: clang-format -i $(git ls-files '*.cpp' '*.hpp')\n{p.stderr[-3000:]}"
    )


def test_python_is_ruff_formatted():
    p = _ruff("format", "--check", ".")
    assert p.returncode == 0, f"fix: ruff format .\n{p.stdout[-4000:]}{p.stderr[-2000:]}"


def test_python_passes_ruff_lint():
    p = _ruff("check", "--output-format", "concise", ".")
    assert p.returncode == 0, f"{p.stdout[-6000:]}{p.stderr[-2000:]}"


def test_format_checks_can_fail(tmp_path):
    """Each check reports a file that breaks its rule, with the project's
    own configuration."""
    shutil.copy(REPO / ".clang-format", tmp_path / ".clang-format")
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    cpp = tmp_path / "wide.cpp"
    cpp.write_text(
        "int f(int aaaaaaaaaaaaaaaaaaaa, int bbbbbbbbbbbbbbbbbbbbbbb, int cccccccccccccccccccc, "
        "int dddddddddddddddd) { return aaaaaaaaaaaaaaaaaaaa; }\n"
    )
    p = subprocess.run(
        [_clang_format(), "--dry-run", "-Werror", cpp.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert p.returncode != 0 and "wide.cpp" in p.stderr, p.stderr
    py = tmp_path / "bad.py"
    py.write_text("import os\nx = {  'a':1 }\n")
    assert _ruff("format", "--check", py.name, cwd=tmp_path).returncode != 0
    lint = _ruff("check", "--output-format", "concise", py.name, cwd=tmp_path)
    assert lint.returncode != 0 and "F401" in lint.stdout, lint.stdout
