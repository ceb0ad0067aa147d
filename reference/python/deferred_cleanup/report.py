# SPDX-License-Identifier: Apache-2.0
"""Combine per-interpreter probe results into one table and compare it with the expected facts.

Usage (``tools/matrix.py probe`` calls it this way)::

    python -m deferred_cleanup.report --out-dir build/probe \\
        [--missing "NAME: why"]... FILE.json...

It prints ONE table with a column per interpreter (and a ``MISSING`` column for
each ``--missing``), a ``free-threaded:`` line derived from the measured
interpreters (``not available (...)`` unless one of them has
``Py_GIL_DISABLED``), the reference's own burst line for each interpreter whose
probe recorded ``deferred_cleanup.reference_burst`` (or says that it was not
available), and then one line ``CPython behaviour changed: <version> <field>
expected X, measured Y`` per difference from
:mod:`deferred_cleanup.cpython_facts`.  An interpreter newer than the table
(e.g. a 3.16 alpha) is compared with the newest row instead, under a heading
``newer than the table: differences from 3.15``.  It writes ``probe.md`` and
``probe.json`` into the out dir.  Exit status: 1 if any difference (for an
interpreter newer than the table only with ``--strict``), else 0.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from . import cpython_facts

NOT_MEASURED = "<not measured>"
NO_ROW = "<no expected row>"


def fmt(value) -> str:
    """Render one value for the table and the difference lines.

    :param value: a measured or expected value (str, int, bool, None).
    :returns: str: strings as they are, everything else as JSON (``true``, ``null``, ``31``).
    """
    return value if isinstance(value, str) else json.dumps(value)


def version_of(result: dict) -> tuple[int, int]:
    """(major, minor) of one probe result.

    :param result: one probe JSON (dict).
    :returns: tuple[int, int].
    """
    vi = result["interpreter"].get("version_info")
    if vi:
        return int(vi[0]), int(vi[1])
    major, minor = result["interpreter"]["version"].split(".")[:2]
    return int(major), int(minor)


def table_range() -> tuple[tuple[int, int], tuple[int, int]]:
    """The oldest and the newest CPython version the expected table has rows for.

    :returns: ((major, minor), (major, minor)), e.g. ``((3, 10), (3, 15))``.
    """
    return (min(f.lo for f in cpython_facts.TABLE), max(f.hi for f in cpython_facts.TABLE))


def differences(
    result: dict, against: tuple[int, int] | None = None
) -> list[tuple[str, str, object, object]]:
    """Compare one result with the expected table.

    Every field of :data:`deferred_cleanup.cpython_facts.FIELDS` is compared; a field that was
    measured but has no row, or has a row but was not measured, is a difference
    too.

    :param result: one probe JSON (dict).
    :param against: the (major, minor) whose rows to compare with; default the
        result's own version.
    :returns: list of (version str, field, expected, measured).
    """
    out = []
    ver = against or version_of(result)
    measured = result.get("fields", {})
    for field in dict.fromkeys([*cpython_facts.FIELDS, *measured]):
        try:
            exp = cpython_facts.expected(field, ver)
        except KeyError:
            exp = NO_ROW
        got = measured.get(field, NOT_MEASURED)
        if exp != got or type(exp) is not type(got):
            out.append((result["interpreter"]["version"], field, exp, got))
    return out


@dataclasses.dataclass
class Check:
    """One interpreter's result compared with the expected table.

    :param name: the interpreter's column name (str).
    :param version: its full version (str, e.g. ``"3.16.0a1"``).
    :param against: the (major, minor) whose rows it was compared with.
    :param newer: whether its version is newer than the table; then ``against``
        is the newest row and the differences are news, not failures (bool).
    :param diffs: (field, expected, measured) for each difference.
    """

    name: str
    version: str
    against: tuple[int, int]
    newer: bool
    diffs: list[tuple[str, object, object]]

    def fails(self, strict: bool = False) -> bool:
        """Whether this comparison fails.

        :param strict: count the differences of a version newer than the table too (bool).
        :returns: bool: True if there is a difference and the version is in the
            table (or ``strict``).
        """
        return bool(self.diffs) and (strict or not self.newer)

    def lines(self, with_name: bool = True) -> list[str]:
        """The difference lines, as ``make probe`` and ``probe --check`` print them.

        :param with_name: append `` (NAME)`` to each line of a version in the table (bool).
        :returns: list[str]: for a version in the table one line
            ``CPython behaviour changed: VERSION FIELD expected X, measured Y`` per
            difference; for a newer version a heading ``newer than the table:
            differences from 3.15 (...)`` and one indented line per difference
            (only the heading says so when there is none).
        """
        if not self.newer:
            tail = f" ({self.name})" if with_name else ""
            return [
                f"CPython behaviour changed: {self.version} {f} expected {fmt(e)}, measured "
                f"{fmt(m)}{tail}"
                for f, e, m in self.diffs
            ]
        v = f"{self.against[0]}.{self.against[1]}"
        head = (
            f"newer than the table: differences from {v} ({self.name}, CPython {self.version}: "
            f"{len(self.diffs)} difference(s), not counted as failures unless --strict)"
        )
        return [head] + [
            f"  {f} expected {fmt(e)} (as on {v}), measured {fmt(m)}" for f, e, m in self.diffs
        ]


def check(result: dict) -> Check:
    """Compare one probe result with the expected table, newest row for a newer version.

    A version newer than the table (e.g. CPython's main branch, 3.16 alpha) is
    compared with the newest row (3.15): its differences say what changed
    since, which is what a CPython developer wants to see, but they are not
    failures of the table.

    :param result: one probe JSON (dict).
    :returns: :class:`Check`.
    """
    ver = version_of(result)
    newest = table_range()[1]
    newer = ver > newest
    against = newest if newer else ver
    diffs = [(f, e, m) for _, f, e, m in differences(result, against)]
    return Check(
        name=result["interpreter"].get("name", "?"),
        version=result["interpreter"]["version"],
        against=against,
        newer=newer,
        diffs=diffs,
    )


def outside_ci(directory: Path) -> list[str]:
    """The free-threaded interpreters measured outside CI, from their saved data.

    :param directory: a directory of ``*.json`` files, each ``{"probe": <probe JSON>, ...}``
        (``notes/interpreters/`` in the repository) (Path).
    :returns: list[str] of ``interpreter.name`` of the runs whose interpreter had
        ``Py_GIL_DISABLED``, sorted; empty when the directory is missing or has none.
    """
    names = []
    for f in sorted(Path(directory).glob("*.json")) if Path(directory).is_dir() else []:
        try:
            md = json.loads(f.read_text()).get("probe", {}).get("interpreter", {})
        except (OSError, ValueError):
            continue
        if md.get("gil_disabled"):
            names.append(f"{md.get('name', f.stem)} {md.get('version', '?')}")
    return sorted(names)


def free_threaded(results: list[dict], outside: Path | None = None) -> str:
    """What the measured interpreters say about free-threaded builds.

    :param results: probe JSONs (list[dict]); each ``interpreter.gil_disabled`` is
        what ``sysconfig.get_config_var("Py_GIL_DISABLED")`` said in that interpreter.
    :param outside: the directory of runs measured outside CI (Path), or None to
        say nothing about them.
    :returns: str, ``"measured on NAME, ..."`` when any has ``Py_GIL_DISABLED``, else
        ``"not available (no Py_GIL_DISABLED build among the N interpreter(s) measured)"``;
        with ``outside``, followed by ``"; measured outside CI: NAME VERSION, ... (DIR)"``
        or ``"; none measured outside CI (DIR has no free-threaded run)"``.
    """
    ft = [
        r["interpreter"].get("name", "?") for r in results if r["interpreter"].get("gil_disabled")
    ]
    if ft:
        line = "measured on " + ", ".join(ft)
    else:
        line = (
            f"not available (no Py_GIL_DISABLED build among the {len(results)} "
            "interpreter(s) measured)"
        )
    if outside is not None:
        names = outside_ci(outside)
        line += (
            f"; measured outside CI: {', '.join(names)} ({outside})"
            if names
            else f"; none measured outside CI ({outside} has no free-threaded run)"
        )
    return line


def burst_line(result: dict) -> str:
    """The reference's own line for one interpreter.

    :param result: one probe JSON (dict).
    :returns: str, e.g. ``reference burst (cp312-pyenv): payloads=10000 cleaned=10000 ...``
        or ``reference burst (NAME): not available (why)``.
    """
    name = result["interpreter"].get("name", "?")
    rb = result.get("reference_burst") or {"available": False, "why": "the probe recorded nothing"}
    if not rb.get("available"):
        return f"reference burst ({name}): not available ({rb.get('why', 'no reason given')})"
    keys = ["payloads", "cleaned", "pending_calls", "drain_cycles", "delay_ms"]
    parts = [f"{k}={fmt(rb[k])}" for k in keys if k in rb]
    parts += [f"{k}={fmt(v)}" for k, v in rb.items() if k not in keys and k != "available"]
    return f"reference burst ({name}, 10000 callbacks, 8 threads): " + " ".join(parts)


def build_rows(results: list[dict], missing: list[tuple[str, str]]) -> list[list[str]]:
    """The combined table as rows of cells (first row is the header).

    :param results: probe JSONs (list[dict]).
    :param missing: (name, why) for each missing interpreter.
    :returns: list of rows, each a list[str].
    """
    head = (
        ["field"] + [r["interpreter"].get("name", "?") for r in results] + [n for n, _ in missing]
    )
    meta = [
        ("version", lambda md: md["version"], "MISSING"),
        ("source", lambda md: md.get("source", "?"), "-"),
        ("build", lambda md: "debug" if md.get("debug") else "release", "-"),
        ("Py_GIL_DISABLED", lambda md: "1" if md.get("gil_disabled") else "0", "-"),
    ]
    rows = [head]
    for label, get, miss in meta:
        rows.append([label] + [get(r["interpreter"]) for r in results] + [miss] * len(missing))
    if missing:
        rows.append(["why missing"] + [""] * len(results) + [w for _, w in missing])
    fields = list(
        dict.fromkeys([*cpython_facts.FIELDS, *(f for r in results for f in r.get("fields", {}))])
    )
    for f in fields:
        rows.append(
            [f]
            + [fmt(r.get("fields", {}).get(f, NOT_MEASURED)) for r in results]
            + ["-"] * len(missing)
        )
    return rows


def text_table(rows: list[list[str]]) -> str:
    """Align rows as a plain-text table.

    :param rows: list of rows (list[str]).
    :returns: str.
    """
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in rows
    )


def md_table(rows: list[list[str]]) -> str:
    """Render rows as a Markdown table.

    :param rows: list of rows (list[str]).
    :returns: str.
    """
    esc = [[c.replace("|", "\\|") for c in r] for r in rows]
    lines = ["| " + " | ".join(esc[0]) + " |", "|" + "---|" * len(esc[0])]
    lines += ["| " + " | ".join(r) + " |" for r in esc[1:]]
    return "\n".join(lines)


def parse_missing(items: list[str]) -> list[tuple[str, str]]:
    """Split ``--missing "NAME: why"`` values.

    :param items: list[str].
    :returns: list of (name, why).
    """
    out = []
    for it in items:
        name, _, why = it.partition(":")
        out.append((name.strip(), why.strip() or "missing"))
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line; see the module docstring.

    :param argv: arguments (list[str]; default ``sys.argv[1:]``).
    :returns: exit status (int): 1 if any measured value differs from the expected table
        (for an interpreter newer than the table only with ``--strict``), else 0.
    :raises SystemExit: on bad arguments or an unreadable JSON file (argparse / json errors).
    """
    ap = argparse.ArgumentParser(
        prog="python -m deferred_cleanup.report", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--out-dir", required=True, type=Path, help="where probe.md and probe.json go")
    ap.add_argument(
        "--missing",
        action="append",
        default=[],
        metavar="NAME: why",
        help="an interpreter of the matrix that is missing, and why (repeatable)",
    )
    ap.add_argument(
        "--strict",
        action="store_true",
        help="also fail on the differences of an interpreter newer than the table",
    )
    ap.add_argument(
        "--outside-ci",
        type=Path,
        metavar="DIR",
        help=(
            "also name the free-threaded runs saved in DIR (notes/interpreters), "
            "measured outside CI"
        ),
    )
    ap.add_argument("files", nargs="*", type=Path, help="probe JSON files, one per interpreter")
    a = ap.parse_args(argv)
    results = [json.loads(p.read_text()) for p in a.files]
    missing = parse_missing(a.missing)
    rows = build_rows(results, missing)
    bursts = [burst_line(r) for r in results]
    checks = [check(r) for r in results]
    diff_lines = [line for c in checks for line in c.lines()]
    failing = [c for c in checks if c.fails(a.strict)]
    n_fail = sum(len(c.diffs) for c in failing)
    newer = [c for c in checks if c.newer]
    in_table = len(results) - len(newer)
    summary = (
        f"{n_fail} difference(s) from the expected table"
        if n_fail
        else f"no difference from the expected table ({in_table} interpreter(s)"
        + (" of the table's versions" if newer else "")
        + f", {len(cpython_facts.FIELDS)} fields each)"
    )
    if newer and not a.strict:
        summary += (
            f"; {sum(len(c.diffs) for c in newer)} difference(s) of {len(newer)} interpreter(s) "
            "newer "
            f"than the table, not counted (--strict counts them)"
        )
    ft_line = "free-threaded: " + free_threaded(results, a.outside_ci)

    print(text_table(rows))
    print(ft_line)
    for line in bursts:
        print(line)
    for line in diff_lines:
        print(line)
    print(summary)

    a.out_dir.mkdir(parents=True, exist_ok=True)
    md = ["# CPython pending-call probe", "", md_table(rows), "", ft_line, ""]
    md += [f"- {line}" for line in bursts] + [""]
    md += [f"- {line.strip()}" for line in diff_lines] + ([""] if diff_lines else [])
    md += [summary, ""]
    (a.out_dir / "probe.md").write_text("\n".join(md))
    (a.out_dir / "probe.json").write_text(
        json.dumps(
            {
                "interpreters": results,
                "missing": [{"name": n, "why": w} for n, w in missing],
                "free_threaded": free_threaded(results, a.outside_ci),
                "differences": [
                    {
                        "version": c.version,
                        "field": f,
                        "expected": e,
                        "measured": m,
                        "interpreter": c.name,
                        "compared_with": f"{c.against[0]}.{c.against[1]}",
                        "newer_than_table": c.newer,
                    }
                    for c in checks
                    for f, e, m in c.diffs
                ],
            },
            indent=1,
            sort_keys=True,
        )
    )
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
