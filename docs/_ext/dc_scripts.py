# SPDX-License-Identifier: Apache-2.0
"""What the site's extensions share: importing one of the repository's tools/
scripts (not a package) as a module, and building a docutils table.

:func:`import_tool` is shared by dc_alternatives, dc_bench, dc_gpu_compare and
dc_promises, so each renders from the script that writes or checks its data
instead of a copy; :func:`table` by dc_alternatives and dc_gpu_compare, which
build their tables as nodes from a tool's ``table_rows``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from docutils import nodes

REPO = Path(__file__).resolve().parents[2]


def import_tool(name: str) -> ModuleType:
    """Import tools/<name>.py without running it as a script.

    Args:
        name: the script's name without ``.py`` (e.g. ``"provenance"``).
    Returns:
        module: the script, imported under the name ``dc_tool_<name>``.
    Raises:
        OSError, ImportError: the script is missing or does not import.
    """
    spec = importlib.util.spec_from_file_location(f"dc_tool_{name}", REPO / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def table(
    head: Sequence[str], rows: Sequence[Sequence[str]], classes: list[str], widths: Sequence[int]
) -> nodes.table:
    """A docutils table: one header row, then one body row per entry of rows.

    Args:
        head: the column titles, one per column.
        rows: the body, each row a cell per column, as plain text.
        classes: the table's HTML classes (the site's CSS styles by them).
        widths: each column's relative width (docutils colspec ``colwidth``),
            one per column.
    Returns:
        nodes.table: the table, each cell a paragraph of its text.
    Raises:
        Nothing; a row shorter or longer than head makes a table Sphinx rejects.
    """
    tbl = nodes.table(classes=classes)
    group = nodes.tgroup(cols=len(head))
    tbl += group
    for width in widths:
        group += nodes.colspec(colwidth=width)
    thead = nodes.thead()
    group += thead
    tbody = nodes.tbody()
    group += tbody
    for part, lines in ((thead, [head]), (tbody, rows)):
        for line in lines:
            row = nodes.row()
            for cell in line:
                para = nodes.paragraph()
                para += nodes.Text(cell)
                row += nodes.entry("", para)
            part += row
    return tbl
