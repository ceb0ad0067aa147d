# SPDX-License-Identifier: Apache-2.0
"""The "Side by side with cuda-core" table, rendered at build time from the
JSON that ``tools/gpu_compare.py`` wrote on the GPU machine.

``.. gpu-compare-table:: notes/gpu/compare/gpu-compare.json`` (a path from the
repository root) becomes: the run's facts as a bullet list, the scenario
titles, and one table row per scenario and implementation.  The rows come from
``tools/gpu_compare.py``'s own ``table_rows`` (the function that also writes
the Markdown table), so the page, the JSON and the Markdown cannot disagree;
``tests/test_gpu_compare.py`` checks the committed files and the built page.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

import dc_scripts as scripts
from dc_json import read_json
from dc_scripts import import_tool

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "gpu_compare.py"  # a dependency of the page (note_dependency)


def _para(text: str, strong: str = "") -> nodes.paragraph:
    p = nodes.paragraph()
    if strong:
        p += nodes.strong(text=strong)
    p += nodes.Text(text)
    return p


def build_nodes(data: dict) -> list[nodes.Node]:
    """The docutils nodes for one run's JSON: facts, scenarios, the table."""
    tool = import_tool("gpu_compare")
    facts = nodes.bullet_list()
    for line in tool.header_lines(data):
        facts += nodes.list_item("", _para(line[2:] if line.startswith("- ") else line))
    scen = nodes.bullet_list()
    for s in data["scenarios"]:
        scen += nodes.list_item("", _para(f": {s['title']}", strong=s["id"]))
    head, rows = tool.table_rows(data)
    table = scripts.table(head, rows, ["gpu-compare"], (8, 14, 14, 64))
    out = [facts]
    if data.get("provenance"):
        prov = import_tool("provenance")
        changed = prov.changed(data["provenance"], REPO)
        out.append(
            _para(
                ("Since that commit these stamped sources changed: " + ", ".join(changed) + ".")
                if changed
                else "None of the stamped sources has changed since that commit."
            )
        )
    return out + [_para("Scenarios:"), scen, table]


class GpuCompareTable(SphinxDirective):
    """``.. gpu-compare-table:: PATH``: the table of the JSON at PATH."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        return build_nodes(read_json(self, self.arguments[0], TOOL))


def setup(app):
    app.add_directive("gpu-compare-table", GpuCompareTable)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
