"""Combine per-interpreter probe results into one table and compare it with the expected facts.

Usage (``tools/matrix.py probe`` calls it this way)::

    python -m deferred_cleanup.report --out-dir build/probe \\
        [--missing "NAME: why"]... FILE.json...

It prints ONE table with a column per interpreter (and a ``MISSING`` column for
each ``--missing``), the line ``free-threaded: not available``, the
reference's own burst line for each interpreter whose probe recorded
``deferred_cleanup.reference_burst`` (or says that it was not available), and
then one line ``CPython behaviour changed: <version> <field> expected X,
measured Y`` per difference from :mod:`deferred_cleanup.cpython_facts`.  It
writes ``probe.md`` and ``probe.json`` into the out dir.  Exit status: 1 if
any difference, else 0.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import cpython_facts

NOT_MEASURED = "<not measured>"
NO_ROW = "<no expected row>"
FREE_THREADED = "free-threaded: not available (no Py_GIL_DISABLED build in the matrix)"


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


def differences(result: dict) -> list[tuple[str, str, object, object]]:
    """Compare one result with the expected table.

    Every field of :data:`deferred_cleanup.cpython_facts.FIELDS` is compared; a field that was
    measured but has no row, or has a row but was not measured, is a difference
    too.

    :param result: one probe JSON (dict).
    :returns: list of (version str, field, expected, measured).
    """
    out = []
    ver = version_of(result)
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
    head = ["field"] + [r["interpreter"].get("name", "?") for r in results] + [n for n, _ in missing]
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
    fields = list(dict.fromkeys([*cpython_facts.FIELDS, *(f for r in results for f in r.get("fields", {}))]))
    for f in fields:
        rows.append([f] + [fmt(r.get("fields", {}).get(f, NOT_MEASURED)) for r in results] + ["-"] * len(missing))
    return rows


def text_table(rows: list[list[str]]) -> str:
    """Align rows as a plain-text table.

    :param rows: list of rows (list[str]).
    :returns: str.
    """
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


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
    :returns: exit status (int): 1 if any measured value differs from the expected table, else 0.
    :raises SystemExit: on bad arguments or an unreadable JSON file (argparse / json errors).
    """
    ap = argparse.ArgumentParser(prog="python -m deferred_cleanup.report", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", required=True, type=Path, help="where probe.md and probe.json go")
    ap.add_argument("--missing", action="append", default=[], metavar="NAME: why",
                    help="an interpreter of the matrix that is missing, and why (repeatable)")
    ap.add_argument("files", nargs="*", type=Path, help="probe JSON files, one per interpreter")
    a = ap.parse_args(argv)
    results = [json.loads(p.read_text()) for p in a.files]
    missing = parse_missing(a.missing)
    rows = build_rows(results, missing)
    bursts = [burst_line(r) for r in results]
    diffs = [d for r in results for d in ((*x, r["interpreter"].get("name", "?")) for x in differences(r))]
    diff_lines = [f"CPython behaviour changed: {v} {f} expected {fmt(e)}, measured {fmt(m)} ({name})"
                  for v, f, e, m, name in diffs]
    summary = (f"{len(diffs)} difference(s) from the expected table" if diffs
               else f"no difference from the expected table ({len(results)} interpreter(s), "
                    f"{len(cpython_facts.FIELDS)} fields each)")

    print(text_table(rows))
    print(FREE_THREADED)
    for line in bursts:
        print(line)
    for line in diff_lines:
        print(line)
    print(summary)

    a.out_dir.mkdir(parents=True, exist_ok=True)
    md = ["# CPython pending-call probe", "", md_table(rows), "", FREE_THREADED, ""]
    md += [f"- {line}" for line in bursts] + [""]
    md += [f"- {line}" for line in diff_lines] + ([""] if diff_lines else [])
    md += [summary, ""]
    (a.out_dir / "probe.md").write_text("\n".join(md))
    (a.out_dir / "probe.json").write_text(json.dumps({
        "interpreters": results,
        "missing": [{"name": n, "why": w} for n, w in missing],
        "free_threaded": "not available",
        "differences": [{"version": v, "field": f, "expected": e, "measured": m, "interpreter": name}
                        for v, f, e, m, name in diffs],
    }, indent=1, sort_keys=True))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
