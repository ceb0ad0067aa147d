# SPDX-License-Identifier: Apache-2.0
"""The Performance page's table of ``Py_AddPendingCall``'s own cost, rendered
at build time from the JSON files ``tools/bench_pending.py`` wrote.

``.. pending-cost-table:: LABEL=PATH [LABEL=PATH ...]`` (paths from the
repository root; a label names the machine, words joined by ``_``) becomes one
table, one row per interpreter measured (``racing8`` is the tool's 8-producer
mode).  Each file is a dependency of the page, so the provenance notice of
``dc_evidence`` names it; the tool itself is not (it is among the files' stamped
sources).
"""

from __future__ import annotations

from pathlib import Path

from sphinx.util.docutils import SphinxDirective

import dc_scripts as scripts
from dc_json import read_json

REPO = Path(__file__).resolve().parents[2]


def table_rows(sources: list[tuple[str, dict]]) -> tuple[list[str], list[list[str]]]:
    """The Performance page's table of Py_AddPendingCall's cost.

    Args:
        sources: ``(machine label, data)`` pairs; data is either one
            ``--one`` result or a merged file (``{"results": {name: result}}``).
    Returns:
        ``(head, rows)``: column titles and one row of str per interpreter
        (ns per call: median and p99; an interpreter that gave no result
        shows its error).
    """
    head = [
        "machine",
        "interpreter",
        "uncontended, 16 per window: median",
        "uncontended, 1 per window: median / p99",
        "8 racing: median / p99",
        "load before",
    ]
    rows = []
    for label, data in sources:
        results = data.get("results") or {data["interpreter"].get("name") or "python3": data}
        for name, r in results.items():
            if "error" in r:
                rows.append([label, name, r["error"], "", "", ""])
                continue
            u, b, x = r["uncontended"], r["uncontended_batch16"], r["racing8"]
            interp = r["interpreter"]
            rows.append(
                [
                    label,
                    f"{name} ({interp['version']})"
                    if interp.get("name")
                    else f"CPython {interp['version']}",
                    f"{b['median_ns']} ns",
                    f"{u['median_ns']} / {u['p99_ns']} ns",
                    f"{x['median_ns']} / {x['p99_ns']} ns",
                    " ".join(f"{v:.1f}" for v in r["machine"]["loadavg_before"]),
                ]
            )
    return head, rows


class PendingCostTable(SphinxDirective):
    """``.. pending-cost-table:: LABEL=PATH ...``: one table of all files."""

    required_arguments = 1
    optional_arguments = 8
    has_content = False

    def run(self):
        sources = []
        for arg in self.arguments:
            label, sep, rel = arg.partition("=")
            if not sep:
                raise self.error(f"pending-cost-table: {arg!r} is not LABEL=PATH")
            sources.append((label.replace("_", " "), read_json(self, rel)))
        head, rows = table_rows(sources)
        return [scripts.table(head, rows, ["pending-cost"], (16, 22, 14, 16, 16, 12))]


def setup(app):
    app.add_directive("pending-cost-table", PendingCostTable)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
