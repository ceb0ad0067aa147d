# SPDX-License-Identifier: Apache-2.0
"""The promise ledger on the Verification page, rendered from tests/promises.toml.

``.. promise-ledger:: tests/promises.toml`` (a path from the repository root)
becomes one table row per promise: its id, the page that states it (a link),
the quoted words, and what guards it: each mutant (a link to its file in
tests/mutants/, with the tests its ``KILLING_TESTS`` name), or why no mutant of
ours can break it, or "no guard yet" and what is missing.  The rows are read
and checked by ``tools/promises.py`` (the same module tests/test_promises.py
runs), so the page and the check cannot disagree; a count of each status
comes first.
"""

from __future__ import annotations

import ast
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

from dc_scripts import import_tool

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "promises.py"  # a dependency of the page (note_dependency)


def plain(text: str) -> str:
    """Text made safe for reStructuredText: every markup character escaped."""
    for ch in "\\`*_|[]<>":
        text = text.replace(ch, "\\" + ch)
    return text


def killing_tests(name: str) -> list[str]:
    """The KILLING_TESTS (or, without them, the KILLED_BY checks) of a mutant."""
    tree = ast.parse((REPO / "tests" / "mutants" / f"{name}.py").read_text())
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            values[node.targets[0].id] = ast.literal_eval(node.value)
    return list(values.get("KILLING_TESTS") or values.get("KILLED_BY") or [])


def rows_rst(tool, rows: list[dict]) -> list[str]:
    """The list-table of the rows, as reStructuredText lines."""
    counts = {s: sum(tool.status(r) == s for r in rows) for s in tool_statuses()}
    out = [
        f"{len(rows)} promises: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + ".",
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 16 34 50",
        "   :class: promise-ledger",
        "",
        "   * - Promise",
        "     - What the page says",
        "     - Guarded by",
    ]
    for row in rows:
        quote = row["quote"]
        said = f"``{quote}``" if row["page"].endswith(".hpp") else quote
        out += [
            f"   * - ``{row['id']}``",
            f"     - :repo-file:`{row['page']}`: {said}",
        ]
        if row.get("mutants"):
            first = True
            for name in row["mutants"]:
                tests = ", ".join(f"``{t}``" for t in killing_tests(name))
                lead = "     - " if first else "       "
                out += [f"{lead}* :repo-file:`tests/mutants/{name}.py` (killed by {tests})"]
                first = False
        elif row.get("reason"):
            out += [f"     - No mutant possible: {plain(row['reason'])}"]
        else:
            out += [f"     - **No guard yet**: {plain(row['gap'])}"]
    return out


def tool_statuses() -> tuple[str, ...]:
    return ("mutant", "no mutant possible", "no guard yet")


class PromiseLedger(SphinxDirective):
    """``.. promise-ledger:: PATH``: the ledger at PATH as a table."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        path = REPO / self.arguments[0]
        self.env.note_dependency(str(path))
        self.env.note_dependency(str(TOOL))
        tool = import_tool("promises")
        try:
            rows = tool.load(path)
        except (OSError, ValueError) as exc:
            raise self.error(f"promise-ledger: cannot read {self.arguments[0]}: {exc}") from exc
        problems = tool.check(rows)
        if problems:
            raise self.error("promise-ledger: " + "; ".join(problems))
        for row in rows:
            for name in row.get("mutants", []):
                self.env.note_dependency(str(REPO / "tests" / "mutants" / f"{name}.py"))
        node = nodes.container()
        self.state.nested_parse(StringList(rows_rst(tool, rows), source=str(path)), 0, node)
        return node.children


#: Contract rows that are paragraphs, not entry points: their link text.
PROSE_ROWS = {
    "contract-arguments": "Arguments",
    "contract-probe-check": "The probe's check",
    "contract-provenance": "Data on the pages",
}


def guarantees_rst(rows: list[dict]) -> list[str]:
    """The contract page's rows of the ledger as a numbered list: each
    guarantee (its quote), a link to the contract row that states it, the
    tests that check it and the mutants they kill (or why none can)."""
    out = []
    for row in rows:
        if row["page"] != "docs/contract.rst":
            continue
        anchor = row.get("row", "")
        name = PROSE_ROWS.get(anchor) or anchor.removeprefix("contract-").replace("-", "_")
        where = f":ref:`{name} <{anchor}>`" if anchor else "(no row)"
        if row.get("mutants"):
            tests = sorted({t for m in row["mutants"] for t in killing_tests(m)})
            guard = (
                "tested by "
                + ", ".join(f"``{t}``" for t in tests)
                + "; mutant "
                + ", ".join(f":repo-file:`tests/mutants/{m}.py`" for m in row["mutants"])
            )
        elif row.get("reason"):
            guard = f"no mutant possible: {plain(row['reason'])}"
        else:
            guard = f"**no guard yet**: {plain(row['gap'])}"
        out += [f"#. {where}: {row['quote']} ({guard})", ""]
    return out


class ContractGuarantees(SphinxDirective):
    """``.. contract-guarantees:: PATH``: the ledger's contract rows at PATH as
    a numbered list (the contract page's first screen)."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        path = REPO / self.arguments[0]
        self.env.note_dependency(str(path))
        tool = import_tool("promises")
        try:
            rows = tool.load(path)
        except (OSError, ValueError) as exc:
            raise self.error(
                f"contract-guarantees: cannot read {self.arguments[0]}: {exc}"
            ) from exc
        for row in rows:
            for name in row.get("mutants", []):
                self.env.note_dependency(str(REPO / "tests" / "mutants" / f"{name}.py"))
        node = nodes.container(classes=["dc-guarantees"])
        self.state.nested_parse(StringList(guarantees_rst(rows), source=str(path)), 0, node)
        return [node]


def setup(app):
    app.add_directive("promise-ledger", PromiseLedger)
    app.add_directive("contract-guarantees", ContractGuarantees)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
