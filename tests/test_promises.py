# SPDX-License-Identifier: Apache-2.0
"""The promise ledger (tests/promises.toml) against the pages and the mutants.

Every promise of the Caveats page and of the contract (the states table in
queue.hpp and the entry-point table of docs/contract.rst) is a row of the
ledger: its page, a quote, and the mutants that break it (or why none can, or
that it has no guard yet).  These tests fail when a quote is no longer on its
page (the promise was reworded or removed: the row must follow), when a row
names a mutant that tests/mutants/ does not have, when a mutant is named by no
row, and when the Verification page no longer renders the ledger.  The first
two tests show the check fails where it must, on a ledger broken on purpose.

Runs once (marker ``mutate``, with the kill matrix that makes the mutants'
claims true), in the cp312-pyenv environment; it reads text only.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.mutate

REPO = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location(
        "dc_promises_tool", REPO / "tools" / "promises.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _row(**kw) -> dict:
    row = {"id": "t", "page": "docs/caveats.rst", "quote": "Only the claim's own call clears"}
    row.update(kw)
    return row


def test_a_quote_that_left_its_page_is_reported():
    tool = _tool()
    rows = [_row(mutants=["m"]), _row(id="u", quote="a sentence that is on no page", reason="r")]
    problems = tool.check(rows, mutants={"m"})
    assert problems == ["u: quote no longer on docs/caveats.rst: 'a sentence that is on no page'"]


def test_a_missing_or_unnamed_mutant_and_a_row_without_a_guard_are_reported():
    tool = _tool()
    rows = [_row(mutants=["gone"]), _row(id="v"), _row(id="v", gap="g", reason="r")]
    problems = tool.check(rows, mutants={"kept"})
    assert "t: mutant 'gone' is not in tests/mutants/" in problems
    assert "mutant 'kept' is named by no promise: add it to a row" in problems
    assert "v: needs exactly one of mutants, reason, gap (has [])" in problems
    assert "v: id used twice" in problems
    assert "v: needs exactly one of mutants, reason, gap (has ['reason', 'gap'])" in problems


def test_a_header_row_is_quoted_from_the_states_table_only():
    tool = _tool()
    inside = _row(page="include/deferred_cleanup/queue.hpp", quote="take_all M alive")
    outside = _row(  # in queue.hpp, but in a doc comment, not in the table
        id="w",
        page="include/deferred_cleanup/queue.hpp",
        quote="Give the claim back after the host refused the pending call",
        gap="g",
    )
    problems = tool.check([inside | {"mutants": ["m"]}, outside], mutants={"m"})
    assert [p.split(":")[0] for p in problems] == ["w"]


def test_the_ledger_is_sound():
    tool = _tool()
    rows = tool.load()
    problems = tool.check(rows)
    assert not problems, "tests/promises.toml:\n" + "\n".join(problems)
    pages = {r["page"] for r in rows}
    assert pages == set(tool.PAGES), f"every page has its promises: {pages}"
    print(f"{len(rows)} promises; " + ", ".join(sorted({tool.status(r) for r in rows})))


def test_the_verification_page_renders_the_ledger():
    text = (REPO / "docs" / "verification.rst").read_text()
    assert ".. promise-ledger:: tests/promises.toml" in text
    conf = (REPO / "docs" / "conf.py").read_text()
    assert '"dc_promises"' in conf


def test_the_contract_opens_with_its_numbered_guarantees_and_comes_early():
    """The contract's first screen is the numbered guarantees (rendered from
    the ledger, each with its row, tests and mutants), and the landing page's
    reading order reaches the contract within its first three entries."""
    head = (REPO / "docs" / "contract.rst").read_text().splitlines()[:15]
    assert ".. contract-guarantees:: tests/promises.toml" in head, head
    index = (REPO / "docs" / "index.rst").read_text()
    order = re.findall(r"^#\. (.*(?:\n   .*)*)", index, re.M)
    assert any(":doc:`contract`" in entry for entry in order[:3]), order[:3]
    rows = _tool().load()
    contract_rows = [r for r in rows if r["page"] == "docs/contract.rst"]
    assert contract_rows and all(r.get("row", "").startswith("contract-") for r in contract_rows)
