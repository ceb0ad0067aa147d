# SPDX-License-Identifier: Apache-2.0
"""The "When to use what" tables, rendered at build time from the JSON that
``tools/alternatives.py`` wrote.

``.. alternatives-table:: docs/_data/alternatives.json`` (a path from the
repository root; option ``:which: burst`` or ``:which: exit``) becomes one
table: a row per handoff, a column per interpreter.  The rows come from the
tool's own ``table_rows`` (the function that also prints the table), so the
page and the JSON cannot disagree.  With ``:which: facts`` it becomes the
run's facts (sizes, machine, provenance) and the reasons for every empty cell;
with ``:which: crashes``, the last line a failing child wrote to stderr.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

import dc_scripts as scripts
from dc_json import read_json
from dc_scripts import import_tool

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "alternatives.py"  # a dependency of the page (note_dependency)


def _para(text: str) -> nodes.paragraph:
    p = nodes.paragraph()
    p += nodes.Text(text)
    return p


def _bullets(lines: list[str]) -> nodes.bullet_list:
    out = nodes.bullet_list()
    for line in lines:
        out += nodes.list_item("", _para(line))
    return out


def facts(data: dict) -> list[nodes.Node]:
    """The run's sizes, machine and provenance, and why a cell is empty."""
    tool = import_tool("alternatives")
    lines = [
        f"Burst: {data['burst_n']:,} payloads from {data['threads']} threads, one run per "
        "handoff and interpreter, each in a fresh interpreter.",
        f"Exit test: {data['exit_runs']} runs per handoff and interpreter; the script's last "
        f"line starts {data['exit_n']:,} completions.",
        f"Machine: {data['machine']['platform']}, {data['machine']['cpu_count']} CPUs; run "
        f"{data['started_utc']} to {data['finished_utc']}.",
    ]
    prov = data.get("provenance")
    if prov:
        changed = import_tool("provenance").changed(prov, REPO)
        lines.append(
            f"Measured at commit {prov['commit'][:12]}"
            + (" (with uncommitted changes)" if prov.get("dirty") else "")
            + "; "
            + (
                "since then these stamped sources changed: " + ", ".join(changed) + "."
                if changed
                else "none of the stamped sources has changed since."
            )
        )
    out: list[nodes.Node] = [_bullets(lines)]
    reasons = tool.absent_reasons(data)
    if reasons:
        out += [_para("Empty cells (n/a) and missing interpreters:"), _bullets(reasons)]
    return out


def table(data: dict, which: str) -> nodes.table:
    """One table (``"burst"`` or ``"exit"``) of the tool's rows."""
    head, rows = import_tool("alternatives").table_rows(data, which)
    widths = [24 if i == 0 else 12 for i in range(len(head))]
    # probe-matrix: scrolls with its first column frozen, like the version table
    return scripts.table(head, rows, ["alternatives", "probe-matrix"], widths)


class AlternativesTable(SphinxDirective):
    """``.. alternatives-table:: PATH`` with ``:which: burst|exit|facts|crashes``."""

    required_arguments = 1
    has_content = False
    option_spec = {"which": lambda s: directives.choice(s, ("burst", "exit", "facts", "crashes"))}

    def run(self) -> list[nodes.Node]:
        data = read_json(self, self.arguments[0], TOOL)
        which = self.options.get("which", "burst")
        if which == "facts":
            return facts(data)
        if which == "crashes":
            lines = import_tool("alternatives").crash_lines(data)
            return [_bullets(lines)] if lines else [_para("Every child exited with status 0.")]
        return [table(data, which)]


def setup(app):
    app.add_directive("alternatives-table", AlternativesTable)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
