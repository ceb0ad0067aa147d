#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The promise ledger (tests/promises.toml): read it and check it.

The ledger lists every promise of the Caveats page, of the queue's states
table (queue.hpp, between its ``[contract-table]`` markers), of the
contract's entry-point table (docs/contract.rst) and of the comparison
variant cuda-core-1.2-fixed (docs/design/variants.rst): the page, a quote of the
promise, and either the mutants in tests/mutants/ that break it, the reason
no mutant of ours can, or, said plainly, that it has no guard yet.

``check()`` returns every problem: a quote no longer on its page, a mutant
that does not exist, a row with none or several of mutants/reason/gap, an id
twice, a mutant that no row names.  tests/test_promises.py fails on any of
them, and the docs extension docs/_ext/dc_promises.py renders the same rows
on the Verification page, so the page and the check read one file.

Usage::

    python3 tools/promises.py          # print the problems; exit 1 if any
    python3 tools/promises.py --table  # also print each row's status

Standard library only (tomllib: Python 3.11 or later).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parent.parent
LEDGER = REPO / "tests" / "promises.toml"
MUTANTS = REPO / "tests" / "mutants"
#: The pages a row may quote, and how each is read.
PAGES = (
    "docs/caveats.rst",
    "docs/contract.rst",
    "include/deferred_cleanup/queue.hpp",
    "include/deferred_cleanup/cpython/deferred_cleanup.h",
    "docs/design/variants.rst",
)
KINDS = ("mutants", "reason", "gap")


def load(path: Path = LEDGER) -> list[dict]:
    """The ledger's rows, in file order.

    Args:
        path (Path): the TOML file; tests/promises.toml by default.
    Returns:
        list[dict]: one dict per ``[[promise]]`` table, as TOML gives it.
    Raises:
        OSError: the file cannot be read.
        tomllib.TOMLDecodeError: it is not TOML.
    """
    with open(path, "rb") as f:
        return list(tomllib.load(f).get("promise", []))


def fold(text: str) -> str:
    """Text with comment leaders (``//`` at a line's start) removed and every
    run of white space folded to one space, so that a quote matches a
    sentence wrapped over several lines or a table row aligned with spaces.

    Args:
        text (str): a page or a quote.
    Returns:
        str: the folded text.
    """
    text = re.sub(r"^[ \t]*//+[ \t]?", " ", text, flags=re.M)
    return re.sub(r"\s+", " ", text).strip()


def page_text(page: str) -> str:
    """The folded text of a page the ledger may quote.  For queue.hpp, only the
    states table between its ``[contract-table]`` markers.

    Args:
        page (str): a path from the repository root, one of :data:`PAGES`.
    Returns:
        str: the folded text.
    Raises:
        OSError: the page cannot be read.
        ValueError: queue.hpp has no complete ``[contract-table]`` block.
    """
    text = (REPO / page).read_text()
    if page.endswith(".hpp"):
        m = re.search(r"// \[contract-table\]\n(.*?)// \[end-contract-table\]", text, re.S)
        if m is None:
            raise ValueError(f"{page}: no // [contract-table] ... // [end-contract-table] block")
        text = m.group(1)
    return fold(text)


def status(row: dict) -> str:
    """What guards a row: "mutant", "no mutant possible" or "no guard yet".

    Args:
        row (dict): one ledger row.
    Returns:
        str: the status word for the page and the table.
    """
    if row.get("mutants"):
        return "mutant"
    return "no mutant possible" if row.get("reason") else "no guard yet"


def existing_mutants(directory: Path = MUTANTS) -> set[str]:
    """The names of the mutants (file stems) in tests/mutants/.

    Args:
        directory (Path): the mutants' directory.
    Returns:
        set[str]: the names.
    """
    return {p.stem for p in directory.glob("*.py")}


def check(rows: list[dict], mutants: set[str] | None = None) -> list[str]:
    """Every problem of the ledger, one line each (empty when it is sound).

    Args:
        rows (list[dict]): the rows, from :func:`load`.
        mutants (set[str] | None): the existing mutants' names; those of
            tests/mutants/ when None.
    Returns:
        list[str]: the problems, each naming the row's id.
    """
    mutants = existing_mutants() if mutants is None else mutants
    problems: list[str] = []
    pages: dict[str, str] = {}
    seen: set[str] = set()
    named: set[str] = set()
    for i, row in enumerate(rows):
        rid = row.get("id") or f"row {i + 1}"
        if rid in seen:
            problems.append(f"{rid}: id used twice")
        seen.add(rid)
        page, quote = row.get("page"), row.get("quote")
        if page not in PAGES:
            problems.append(f"{rid}: page {page!r} is not one of {', '.join(PAGES)}")
        elif not quote:
            problems.append(f"{rid}: no quote")
        else:
            if page not in pages:
                pages[page] = page_text(page)
            if fold(quote) not in pages[page]:
                problems.append(f"{rid}: quote no longer on {page}: {quote!r}")
        if page == "docs/contract.rst" and not str(row.get("row", "")).startswith("contract-"):
            problems.append(f"{rid}: a contract row needs row = the contract-... anchor stating it")
        given = [k for k in KINDS if row.get(k)]
        if len(given) != 1:
            problems.append(f"{rid}: needs exactly one of mutants, reason, gap (has {given})")
        for name in row.get("mutants", []):
            named.add(name)
            if name not in mutants:
                problems.append(f"{rid}: mutant {name!r} is not in tests/mutants/")
    for name in sorted(mutants - named):
        problems.append(f"mutant {name!r} is named by no promise: add it to a row")
    return problems


def main(argv: list[str]) -> int:
    rows = load()
    if "--table" in argv:
        for row in rows:
            what = ", ".join(row.get("mutants", [])) or row.get("reason") or row.get("gap")
            print(f"{row['id']:40} {status(row):20} {what}")
    problems = check(rows)
    for p in problems:
        print(f"[promises] {p}")
    counts = {
        s: sum(status(r) == s for r in rows)
        for s in ("mutant", "no mutant possible", "no guard yet")
    }
    print(f"[promises] {len(rows)} promises: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
