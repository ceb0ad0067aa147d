# SPDX-License-Identifier: Apache-2.0
"""tools/provenance.py: a stamp says which sources a measured figure measured,
and ``changed`` lists every source that differs since (edited, removed or new),
which the docs build turns into a page's "measured on older code" notice."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _provenance():
    spec = importlib.util.spec_from_file_location(
        "dc_provenance_tool", REPO / "tools" / "provenance.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_changed_lists_edited_removed_and_new_sources(tmp_path):
    pv = _provenance()
    src = tmp_path / "src"
    src.mkdir()
    for name in ("a.hpp", "b.hpp", "c.hpp"):
        (src / name).write_text(f"// {name}\n")
    st = pv.stamp(["src/*.hpp"], repo=tmp_path)
    assert pv.changed(st, repo=tmp_path) == [], "nothing changed since the stamp"
    (src / "a.hpp").write_text("// a.hpp, edited\n")
    assert pv.changed(st, repo=tmp_path) == ["src/a.hpp"]
    (src / "b.hpp").unlink()
    assert pv.changed(st, repo=tmp_path) == ["src/a.hpp", "src/b.hpp"], "a removed source"
    (src / "d.hpp").write_text("// new\n")
    assert pv.changed(st, repo=tmp_path) == ["src/a.hpp", "src/b.hpp", "src/d.hpp"]


def test_a_removed_source_alone_makes_the_stamp_stale(tmp_path):
    pv = _provenance()
    (tmp_path / "x.hpp").write_text("int x;\n")
    (tmp_path / "y.hpp").write_text("int y;\n")
    st = pv.stamp(["*.hpp"], repo=tmp_path)
    (tmp_path / "y.hpp").unlink()
    assert pv.changed(st, repo=tmp_path) == ["y.hpp"]
