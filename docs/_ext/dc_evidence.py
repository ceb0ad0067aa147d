# SPDX-License-Identifier: Apache-2.0
"""Evidence that cannot go stale silently: every measured figure a page shows
says which code it measured, and says so loudly when that code has changed.

Every data file a page renders (a JSON that a directive turns into a table,
a disassembly or a log that ``literalinclude`` quotes) carries a provenance
stamp: the commit and the sha256 of each source it measured
(``tools/provenance.py``: the JSON key ``provenance``, a text file's first
line ``# provenance: {...}``, or a sidecar ``FILE.provenance.json``).

* ``doctree-read``: for every data file the page depends on (any path under
  ``notes/``, ``docs/_data/`` or ``build/`` that a directive noted with
  ``env.note_dependency``; ``literalinclude`` does that itself), the page
  gets, under its title, one line per file saying where it was measured and,
  when a stamped source differs in the working tree now, a warning
  admonition: "measured at <commit>; since then <files> changed".  A data
  file without a stamp is a build warning (hence an error under ``-W``).
  So a stamped file that a new page renders needs no code here.
* Regenerated files (:data:`REGENERATED`): what ``make test`` can measure
  on its own machine, ``tools/docs.sh`` re-measures before every build
  (``tools/evidence.py`` into ``build/evidence/``, the probe into
  ``build/probe/``).  :func:`resolve` picks that copy when it is there and
  current, the committed copy under ``notes/`` otherwise.
* ``literalinclude`` is replaced by a subclass that resolves its file with
  :func:`resolve` and leaves out a text file's stamp line.
"""

from __future__ import annotations

import sys
from pathlib import Path

from docutils import nodes
from sphinx.directives.code import LiteralInclude
from sphinx.util import logging

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import provenance  # noqa: E402 - tools/provenance.py, standard library only

logger = logging.getLogger(__name__)

# Committed copy -> the copy tools/docs.sh regenerates before each build.
REGENERATED = {
    f"notes/lost-wakeup/{name}": f"build/evidence/{name}"
    for name in ("lost-wakeup.json", "gate-sb.json", "disasm-ours.txt", "disasm-gate-sb.txt")
}
# Where a page's data files live (repository-relative prefixes).
DATA_PREFIXES = ("notes/", "docs/_data/", "build/evidence/", "build/probe/")
DATA_SUFFIXES = (".json", ".txt", ".csv", ".log")  # notes/*.md are prose, not data
LISTED_FILES = 6  # changed sources named in a notice; the rest are counted


def _rel(path: Path) -> str | None:
    try:
        return Path(path).resolve().relative_to(REPO).as_posix()
    except ValueError:
        return None


def is_data(rel: str) -> bool:
    """Whether a repository-relative path is a rendered data file."""
    return (
        rel.startswith(DATA_PREFIXES)
        and rel.endswith(DATA_SUFFIXES)
        and not rel.endswith(".provenance.json")
    )


def _stale(rel: str) -> bool:
    try:
        st = provenance.read_stamp(REPO / rel)
    except (OSError, ValueError):
        return True
    return st is None or bool(provenance.changed(st, REPO))


def resolve(rel: str) -> str:
    """The file to render for the committed data file ``rel``: its
    regenerated copy when that exists and is current (or when both are
    stale), else ``rel`` itself.

    :param rel: repository-relative path of the committed file
    :returns: a repository-relative path
    """
    regen = REGENERATED.get(rel)
    if regen is None or not (REPO / regen).exists():
        return rel
    if not _stale(regen) or _stale(rel):
        return regen
    return rel


def describe(rel: str) -> tuple[str, list[str] | None, dict | None]:
    """One line saying where ``rel`` was measured, and the sources changed
    since (None when the file has no readable stamp).

    :param rel: repository-relative path of a data file
    :returns: ``(line, changed, stamp)``
    """
    try:
        st = provenance.read_stamp(REPO / rel)
    except (OSError, ValueError) as exc:
        return f"{rel}: its provenance stamp cannot be read ({exc})", None, None
    if st is None:
        return f"{rel} records no provenance (no commit, no source hashes)", None, None
    changed = provenance.changed(st, REPO)
    commit = st.get("commit", "unknown")[:12]
    dirty = " plus uncommitted edits" if st.get("dirty") else ""
    how = "re-measured by this build (tools/docs.sh)" if rel in REGENERATED.values() else "measured"
    return f"{rel}: {how} at {commit}{dirty}", changed, st


def _code(text: str) -> nodes.literal:
    return nodes.literal(text, text)


def notice_nodes(rels: list[str], location=None) -> list[nodes.Node]:
    """The provenance lines and stale-data warnings for a page's data files."""
    lines, stale = [], []
    for rel in rels:
        line, changed, st = describe(rel)
        if st is None:
            logger.warning(
                "data file without a provenance stamp: %s (tools/provenance.py stamp)",
                rel,
                location=location,
            )
            stale.append((rel, line, None))
        elif changed:
            stale.append((rel, line, (st, changed)))
        lines.append(line)
    out: list[nodes.Node] = []
    for rel, line, info in stale:
        adm = nodes.admonition(classes=["warning", "dc-stale"])
        adm += nodes.title("", "Measured on older code")
        p = nodes.paragraph()
        if info is None:
            p += nodes.Text(line + ".")
        else:
            st, changed = info
            shown = changed[:LISTED_FILES]
            p += nodes.Text("Measured at ")
            p += _code(st.get("commit", "unknown")[:12])
            p += nodes.Text("; since then ")
            for i, f in enumerate(shown):
                if i:
                    p += nodes.Text(", ")
                p += _code(f)
            more = len(changed) - len(shown)
            p += nodes.Text(f"{f' and {more} more' if more else ''} changed. ")
            p += nodes.Text("The figures from ")
            p += _code(rel)
            p += nodes.Text(" below may not describe the code as it is now.")
        adm += p
        out.append(adm)
    if lines:
        box = nodes.container(classes=["dc-provenance"])
        box += nodes.paragraph("", "Data on this page, and the code it measured:")
        items = nodes.bullet_list()
        for line in lines:
            rel, _, how = line.partition(": ")
            para = nodes.paragraph()
            para += _code(rel)
            para += nodes.Text(f": {how}" if how else "")
            items += nodes.list_item("", para)
        box += items
        out.append(box)
    return out


def page_data_files(app, docname: str) -> list[str]:
    """The data files a page depends on, repository-relative, sorted."""
    srcdir = Path(app.srcdir)
    out = set()
    for dep in app.env.dependencies.get(docname, ()):
        rel = _rel(srcdir / dep)
        if rel and is_data(rel) and (REPO / rel).exists():  # a missing file: its directive says so
            out.add(rel)
    return sorted(out)


def add_notices(app, doctree: nodes.document) -> None:
    """``doctree-read``: the notices under the page's title."""
    docname = app.env.docname
    rels = page_data_files(app, docname)
    if not rels:
        return
    new = notice_nodes(rels, location=(docname, 1))
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None:
        doctree[0:0] = new
        return
    title = next((i for i, n in enumerate(section.children) if isinstance(n, nodes.title)), -1)
    section[title + 1 : title + 1] = new


class EvidenceLiteralInclude(LiteralInclude):
    """``literalinclude`` that renders the regenerated copy of a data file
    when there is one (:func:`resolve`) and leaves out a stamp line."""

    def run(self):
        if self.arguments[0].startswith("/"):
            path = Path(self.env.srcdir) / self.arguments[0][1:]
        else:
            path = Path(self.env.doc2path(self.env.docname)).parent / self.arguments[0]
        rel = _rel(path)
        if rel and is_data(rel):
            rel = resolve(rel)
            self.arguments[0] = (
                "/"
                + "/".join([".."] * len(Path(self.env.srcdir).resolve().relative_to(REPO).parts))
                + "/"
                + rel
            )
            first = (REPO / rel).read_text(errors="replace").split("\n", 1)[0]
            marked = {"start-after", "start-at", "lines", "pyobject"} & set(self.options)
            if first.startswith(provenance.TEXT_PREFIX) and not marked:
                self.options["lines"] = "2-"
        return super().run()


def setup(app):
    app.add_directive("literalinclude", EvidenceLiteralInclude, override=True)
    app.connect("doctree-read", add_notices)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
