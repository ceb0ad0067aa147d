# SPDX-License-Identifier: Apache-2.0
"""Sphinx directive for the model's recorded runs of a candidate rule.

``.. model-variant-table::`` renders the JSON that ``tests/model/run.py
--variant NAME --json docs/_data/model-NAME.json`` wrote: one row per check
(the checks that verify the rule, with the candidate's macros added), with
the property, spin's result and the state space.  The file carries a
provenance stamp (tools/provenance.py); dc_evidence shows the notice when the
model or its runner changed since the run.
"""

from __future__ import annotations

import json
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

REPO = Path(__file__).resolve().parents[2]


def _result(c: dict) -> str:
    if c.get("errors") == 0:
        return "verified"
    if c.get("acceptance_cycle"):
        return "**counterexample** (an acceptance cycle; the search stops at it)"
    if c.get("assertion"):
        return f"**counterexample** (``{c['assertion']}``)"
    return f"**{c.get('errors')} errors**"


class ModelVariantTable(SphinxDirective):
    """One row per recorded check: name and macros, property (safety, or
    liveness: the ltl claim ``drained``), result, states stored, seconds.
    Option ``:json:`` (repository-relative)."""

    has_content = False
    option_spec = {"json": directives.unchanged_required}

    def run(self):
        rel = self.options["json"]
        path = REPO / rel
        self.env.note_dependency(str(path))
        if not path.exists():
            raise self.error(f"{rel} is missing: run tests/model/run.py --variant and commit it")
        data = json.loads(path.read_text())
        extra = set(data["macros"])
        rows = ["   * - check (macros)", "     - property", "     - result"]
        rows += ["     - states stored", "     - seconds"]
        for c in data["checks"]:
            macros = " ".join(m for m in c["macros"] if m not in extra)
            states = c.get("states_stored")
            rows += [
                f"   * - ``{c['name'].split(':')[-1]}``",
                "",
                f"       {macros}",
                "     - liveness" if c["liveness"] else "     - safety",
                f"     - {_result(c)}",
                f"     - {states:,}" if states is not None else "     - -",
                f"     - {c.get('wall_s')}",
            ]
        rst = [
            ".. list-table::",
            "   :header-rows: 1",
            "   :widths: 40 12 24 14 10",
            "",
            *rows,
            "",
            f"Each check with ``{' '.join(sorted(extra))}`` added; liveness is the claim "
            "``drained`` under weak fairness. Recorded by "
            f"``tests/model/run.py --variant {data['variant']} --json {rel}``; "
            f"rendered from :repo-file:`{rel}`.",
        ]
        container = nodes.container(classes=["model-variant-table"])
        self.state.nested_parse(StringList(rst, source=str(path)), self.content_offset, container)
        return [container]


def setup(app):
    app.add_directive("model-variant-table", ModelVariantTable)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
