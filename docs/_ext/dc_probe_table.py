# SPDX-License-Identifier: Apache-2.0
"""The CPython version table of the docs site, as reStructuredText, from the
probe's JSON (``make probe`` -> ``build/probe/probe.json``) and the expected
table (``deferred_cleanup.cpython_facts``).

One column per interpreter, one row per field of the expected table, in its
order.  A measured value that differs from the expected value for that
interpreter's version is shown in bold with the expected value beside it.  The
rows' citations become footnotes, one per row of the expected table (a field
whose value changed between versions has one footnote per version range).
Kept free of Sphinx so that it can be tested on its own.
"""

from __future__ import annotations

import json
import re
from typing import Any

REQUIRED_MINORS = ["3.10", "3.11", "3.12", "3.13", "3.14", "3.15"]


def interpreters(data: Any) -> tuple[list[dict], list[str], str]:
    """Find the per-interpreter results in the probe's JSON.

    Args:
        data: the parsed JSON: a list of results, or a dict holding that list
            under ``interpreters`` (what ``deferred_cleanup.report`` writes),
            ``results`` or ``columns`` with ``missing`` and ``free_threaded``
            beside it, or a dict of results keyed by interpreter name.

    Returns:
        tuple: the results (list[dict], each with ``interpreter`` and
        ``fields``), the missing interpreters (list[str], ``"name: why"``),
        and what the file says about a free-threaded build (str, "" if
        nothing).

    Raises:
        ValueError: no per-interpreter results found.
    """
    missing: list[str] = []
    free_threaded = ""
    if isinstance(data, dict):
        free_threaded = str(data.get("free_threaded") or "")
        missing = [
            f"{m.get('name', '?')}: {m.get('why', '?')}" if isinstance(m, dict) else str(m)
            for m in data.get("missing", [])
        ]
        for key in ("results", "interpreters", "columns"):
            if isinstance(data.get(key), list):
                data = data[key]
                break
        else:
            data = [v for v in data.values() if isinstance(v, dict) and "fields" in v]
    if not isinstance(data, list) or not all(isinstance(r, dict) and "fields" in r for r in data):
        raise ValueError(
            "no per-interpreter results (objects with 'interpreter' and 'fields') found"
        )
    return data, missing, free_threaded


def free_threaded_line(results: list[dict], said: str = "") -> str:
    """What the measured interpreters say about free-threaded builds.

    Args:
        results (list[dict]): the per-interpreter results; each interpreter's
            metadata may carry ``gil_disabled`` (bool, ``Py_GIL_DISABLED``).
        said (str): what the JSON file itself says (``free_threaded``), used
            only when no interpreter carries ``gil_disabled``.

    Returns:
        str: one reStructuredText sentence derived from the interpreters
        actually measured (the free-threaded ones by name, or "none of the N
        measured"); the file's own text when no interpreter says; "" when
        neither does.

    Raises:
        Nothing.
    """
    known = [r["interpreter"] for r in results if "gil_disabled" in r.get("interpreter", {})]
    if not known:
        return f"Free-threaded build (``Py_GIL_DISABLED``): {_cell(said)}." if said else ""
    ft = [str(i.get("name", "?")) for i in known if i.get("gil_disabled")]
    if ft:
        names = ", ".join(f"``{n}``" for n in ft)
        return (
            f"Free-threaded build (``Py_GIL_DISABLED``): measured on {names} ({len(ft)} of the "
            f"{len(known)} interpreters)."
        )
    return (
        f"Free-threaded build (``Py_GIL_DISABLED``): none of the {len(known)} interpreters "
        "measured is "
        "one, so no column here says anything about free-threaded CPython."
    )


def _version(result: dict) -> tuple[int, int]:
    it = result.get("interpreter", {})
    if "version_info" in it:
        return tuple(it["version_info"][:2])  # type: ignore[return-value]
    m = re.match(r"(\d+)\.(\d+)", str(it.get("version", "")))
    if not m:
        raise ValueError(f"interpreter {it.get('name')!r} has no version")
    return int(m[1]), int(m[2])


def _lit(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    text = text.replace("`", "'")
    return f"``{text}``" if text.strip() else "(empty)"


def _cell(text: str) -> str:
    return text.replace("\n", " ")


def _label(field: str, i: int, prefix: str = "") -> str:
    return prefix + "fact-" + re.sub(r"[^a-z0-9]+", "-", field.lower()) + f"-{i}"


def render(
    data: Any, facts: Any, facts_why: str = "", label_prefix: str = "", require_all: bool = True
) -> tuple[str, list[str]]:
    """Make the version table.

    Args:
        data: the parsed probe JSON (see :func:`interpreters`).
        facts: the ``deferred_cleanup.cpython_facts`` module, or None when it
            cannot be imported (the table is then made without expectations,
            and that is reported as a problem).
        facts_why (str): why ``facts`` is None.
        label_prefix (str): prefix of the footnote labels, so that two tables
            can share a page.
        require_all (bool): report each CPython 3.10 to 3.15 without a result
            as a problem (the CI table); False for runs measured elsewhere.

    Returns:
        tuple: the reStructuredText (str) and the problems (list[str]: a
        CPython version 3.10 to 3.15 without a result, or no expected table),
        which the directive turns into warnings.

    Raises:
        ValueError: ``data`` holds no results, or a result has no version.
    """
    results, missing, free_threaded = interpreters(data)
    problems: list[str] = []
    results = sorted(
        results,
        key=lambda r: (
            _version(r),
            bool(r["interpreter"].get("debug")),
            str(r["interpreter"].get("name")),
        ),
    )
    have = {f"{a}.{b}" for a, b in map(_version, results)}
    for minor in REQUIRED_MINORS if require_all else []:
        if minor not in have:
            problems.append(f"no probe result for CPython {minor}")
    if facts is None:
        problems.append(
            f"deferred_cleanup.cpython_facts cannot be imported ({facts_why}): no expected values"
        )
        fields = list(dict.fromkeys(k for r in results for k in r["fields"]))
    else:
        fields = list(facts.FIELDS) + [
            k for r in results for k in r["fields"] if k not in facts.FIELDS
        ]
        fields = list(dict.fromkeys(fields))

    head = ["Field"]
    for r in results:
        it = r["interpreter"]
        flag = " (debug)" if it.get("debug") else ""
        head.append(f"{it.get('version', '?')}{flag} ``{it.get('name', '?')}``")
    lines = [
        ".. list-table:: Measured by the probe, checked against the expected table",
        "   :header-rows: 1",
        "   :stub-columns: 1",
        "   :class: probe-matrix",
        "",
    ]
    lines.append("   * - " + _cell(head[0]))
    lines += [f"     - {_cell(h)}" for h in head[1:]]
    footnotes: list[str] = []
    mismatches = 0
    for field in fields:
        fact_rows = facts.rows(field) if facts is not None else []
        refs = ""
        for i, row in enumerate(fact_rows):
            label = _label(field, i, label_prefix)
            refs += f" [#{label}]_"
            span = f"{row.lo[0]}.{row.lo[1]}" + (
                "" if row.lo == row.hi else f" to {row.hi[0]}.{row.hi[1]}"
            )
            footnotes += [
                f".. [#{label}] ``{field}`` = {_lit(row.value)} on CPython {span}. {row.cite}",
                "",
            ]
        lines.append(f"   * - ``{field}``{refs}")
        for r in results:
            if field not in r["fields"]:
                lines.append("     - (not measured)")
                continue
            got = r["fields"][field]
            text = _lit(got)
            if facts is not None and fact_rows:
                newest = max(f.hi for f in facts.TABLE)
                try:
                    if (
                        _version(r) > newest
                    ):  # newer than the table: compared with the newest row, as news
                        want = facts.expected(field, newest)
                        if (type(want), want) != (type(got), got):
                            text = (
                                f"**{_lit(got)}** (news: {_lit(want)} on {newest[0]}.{newest[1]})"
                            )
                        lines.append(f"     - {_cell(text)}")
                        continue
                    want = facts.expected(field, _version(r))
                except KeyError:
                    want = None
                    text += " (no expected value)"
                else:
                    if want != got:
                        mismatches += 1
                        text = f"**{_lit(got)}** (expected {_lit(want)})"
            lines.append(f"     - {_cell(text)}")
    lines.append("")
    summary = f"{len(results)} interpreter(s), {len(fields)} field(s); " + (
        "every measurement matches the expected table."
        if mismatches == 0
        else f"{mismatches} measurement(s) differ from the expected table (in bold)."
    )
    out = [summary, ""]
    if missing:
        out += (
            ["Interpreters the probe could not run:", ""]
            + [f"* {_cell(m)}" for m in missing]
            + [""]
        )
    ft_line = free_threaded_line(results, free_threaded)
    if ft_line:
        out += [ft_line, ""]
    out += lines
    burst = [r for r in results if isinstance(r.get("reference_burst"), dict)]
    if burst:
        out += [
            "The reference on one burst of destructor callbacks "
            "(``deferred_cleanup.reference_burst``):",
            "",
            ".. list-table::",
            "   :header-rows: 1",
            "",
            "   * - Interpreter",
            "     - Result",
        ]
        for r in burst:
            b = r["reference_burst"]
            desc = (
                ", ".join(f"{k} {_lit(v)}" for k, v in b.items() if k != "available")
                if b.get("available", True)
                else f"not measured: {b.get('why', '?')}"
            )
            out += [f"   * - ``{r['interpreter'].get('name', '?')}``", f"     - {_cell(desc)}"]
        out.append("")
    out += [".. rubric:: Sources of the expected values", ""] + footnotes
    return "\n".join(out), problems
