# SPDX-License-Identifier: Apache-2.0
"""Sphinx glue for the deferred-cleanup site: what makes the site generated
from the code and the measurements rather than copied from them.

* ``run_doxygen``: runs Doxygen (``docs/Doxyfile``, XML only) when the build
  starts and turns each of its warnings into a Sphinx warning, so that
  ``sphinx -W`` fails on them and ``--keep-going`` lists all of them.
* ``:repo-file:`path``` role: a path in the repository, rendered as a literal;
  a warning when the path does not exist (the interleaving tables name the
  test, model or litmus file that checks them, and those names must be real).
* ``.. probe-matrix::`` directive: the CPython version table, one column per
  interpreter, from ``build/probe/probe.json`` (``make probe``), with the
  citations of the expected table (``deferred_cleanup.cpython_facts``) as
  footnotes.  A missing JSON file is an error that says how to make it.
* ``.. sequence::`` directive: a sequence diagram (lanes and messages in a
  small text format) turned into graphviz code with pinned positions, then
  rendered to SVG at build time by ``sphinx.ext.graphviz`` like any diagram.
* ``.. doxygen-header:: NAME.hpp``: every documented declaration of one
  header, read from Doxygen's XML and rendered through Breathe's per-symbol
  directives, so that a declaration added to a header appears without editing
  the page, and the API reference stays grouped by header.
* ``.. lost-wakeup-table::``: the lost-wakeup rates per variant, read from
  the JSON that ``make lost-wakeup`` writes (``notes/lost-wakeup/lost-wakeup.json``,
  committed), with the machine and compiler it was measured on.
* ``.. gate-sb-table::``: the same for ``gate-sb.json`` (tests/cpp/gate_sb.cpp).
  Both read the copy that ``tools/docs.sh`` regenerated into ``build/evidence``
  when there is one (``dc_evidence.resolve``).
* ``.. component-quotes:: NAME``: checks that the header
  ``include/deferred_cleanup/NAME.hpp`` is quoted by the page that
  uses it (each component page quotes its own header), then renders nothing.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
HEADERS = REPO / "include" / "deferred_cleanup"
DOXYGEN_WARNING = re.compile(r"^(?P<file>[^:\s][^:]*):(?P<line>\d+): (?P<text>.*)$")


# --------------------------------------------------------------- Doxygen
def run_doxygen(app: Sphinx) -> None:
    """Run Doxygen (``docs/Doxyfile``, with INPUT and OUTPUT_DIRECTORY taken
    from ``dc_doxygen_input`` / ``dc_doxygen_output``) and turn each of its
    warnings into a Sphinx warning (type ``doxygen``) at the header's line."""
    exe = shutil.which("doxygen")
    if exe is None:
        raise ExtensionError(
            "doxygen is not installed: `make docs` (tools/docs.sh) installs it with apt-get"
        )
    out = Path(app.config.dc_doxygen_output)
    if out.exists():
        shutil.rmtree(out)  # stale XML of a removed declaration must not survive
    out.mkdir(parents=True)
    inputs = " ".join(f'"{Path(p)}"' for p in app.config.dc_doxygen_input)
    config = (
        f'@INCLUDE = "{REPO / "docs" / "Doxyfile"}"\nINPUT = {inputs}\nOUTPUT_DIRECTORY = "{out}"\n'
    )
    proc = subprocess.run(
        [exe, "-"], input=config, cwd=REPO, capture_output=True, text=True, timeout=300
    )
    lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
    # One message per "file:line: warning|error: text"; indented lines that
    # follow belong to it (e.g. the list of undocumented parameters).
    messages: list[tuple[str | None, str]] = []
    for line in lines:
        m = DOXYGEN_WARNING.match(line)
        if m and re.match(r"(warning|error):", m["text"]):
            path = Path(m["file"])
            where = (
                str(path.relative_to(REPO))
                if path.is_absolute() and path.is_relative_to(REPO)
                else str(path)
            )
            messages.append((f"{where}:{m['line']}", m["text"]))
        elif messages and line.startswith((" ", "\t")):
            where, text = messages[-1]
            messages[-1] = (where, f"{text} {line.strip()}")
        elif re.search(r"\b(warning|error)\b", line, re.I):
            messages.append((None, line))
    messages = list(dict.fromkeys(messages))  # FAIL_ON_WARNINGS repeats them at the end
    for where, text in messages:
        logger.warning("Doxygen: %s", text, location=where, type="doxygen", subtype="warning")
    warned = len(messages)
    if proc.returncode != 0 and warned == 0:
        raise ExtensionError(f"doxygen exited {proc.returncode}:\n" + "\n".join(lines[-40:]))
    if not (out / "xml" / "index.xml").exists():
        raise ExtensionError("doxygen wrote no build/docs/doxygen/xml/index.xml")
    for xml in (out / "xml").glob("*.xml"):
        text = xml.read_text(encoding="utf-8")
        fixed = join_para_lines(text)
        if fixed != text:
            xml.write_text(fixed, encoding="utf-8")
    logger.info("doxygen: XML in %s (%d warning(s))", out / "xml", warned)


VERBATIM_TAGS = ("verbatim", "programlisting", "preformatted")


def join_para_lines(xml: str) -> str:
    """Join the lines of running text in Doxygen's XML.

    Doxygen keeps a line break inside a quoted phrase of a comment (``"fn(arg)
    runs on`` / ``the main thread"``) as a newline in the ``<para>`` text, and
    Breathe renders each such line as a paragraph of its own: the sentence is
    cut in two on the page.  Inside ``<para>`` (outside verbatim blocks and
    program listings) a newline is just a space.

    Args:
        xml (str): one XML file written by Doxygen.

    Returns:
        str: the same XML with those newlines replaced by spaces.

    Raises:
        Nothing.
    """
    out: list[str] = []
    para = verbatim = 0
    for tok in re.split(r"(<[^>]*>)", xml):
        if tok.startswith("<"):
            m = re.match(r"<(/?)([\w:-]+)", tok)
            if m and not tok.endswith("/>"):
                closing, name = m[1] == "/", m[2]
                if name == "para":
                    para += -1 if closing else 1
                elif name in VERBATIM_TAGS:
                    verbatim += -1 if closing else 1
            out.append(tok)
        elif para > 0 and verbatim == 0 and "\n" in tok and tok.strip():
            out.append(tok.replace("\n", " "))
        else:
            out.append(tok)
    return "".join(out)


# --------------------------------------------------------------- :repo-file:
class repo_file_ref(nodes.Inline, nodes.TextElement):
    """A ``:repo-file:`` mention, turned into a link when the page is resolved."""


REPO_PAGES = "_repo"  # the built site's copy of the files that pages name
SOURCE_LANG = {
    ".hpp": "cpp",
    ".cpp": "cpp",
    ".h": "cpp",
    ".py": "python",
    ".sh": "bash",
    ".toml": "toml",
    ".json": "json",
    ".md": "markdown",
    ".rst": "rst",
    ".cmake": "cmake",
    ".yml": "yaml",
}


def symbol_line(path: Path, symbol: str) -> int | None:
    """The line (1-based) that defines ``symbol`` in ``path``: a ``def`` or
    ``class`` of that name, else its first occurrence as a whole word; None
    when it does not occur."""
    lines = path.read_text(errors="replace").splitlines()
    for pattern in (
        rf"^\s*(async\s+def|def|class)\s+{re.escape(symbol)}\b",
        rf"\b{re.escape(symbol)}\b",
    ):
        for i, line in enumerate(lines, 1):
            if re.search(pattern, line):
                return i
    return None


def repo_file_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``:repo-file:`tests/litmus/sb.litmus``` -> a link to the file; a
    warning when the path does not exist.  ``path::NAME`` (a test function, a
    model check) also requires NAME to occur in that file as a whole word, and
    links to the line that defines it.

    The link goes to the file's page in the built site (``_repo/PATH.html``,
    the file highlighted with line anchors, written by :func:`repo_pages`), or,
    when ``dc_repo_url`` is set in conf.py, to that URL pattern
    (``{path}`` and ``{line}`` are filled in)."""
    ref = text.strip()
    rel, _, symbol = ref.partition("::")
    rel = rel.rstrip("/")
    literal = nodes.literal(rawtext, ref, classes=["repo-file"])
    path = REPO / rel
    if not path.exists():
        return [literal], [
            inliner.reporter.warning(
                f"repo-file: {rel} does not exist in the repository", line=lineno
            )
        ]
    line = None
    if symbol:
        line = symbol_line(path, symbol) if path.is_file() else None
        if line is None:
            return [literal], [
                inliner.reporter.warning(f"repo-file: {rel} has no {symbol!r}", line=lineno)
            ]
    env = inliner.document.settings.env
    files = getattr(env, "dc_repo_files", None)
    if files is None:
        files = env.dc_repo_files = {}
    files.setdefault(rel, set()).add(env.docname)
    node = repo_file_ref(rawtext, "", literal, path=rel, line=line or 0)
    return [node], []


def purge_repo_files(app, env, docname):
    for docs in getattr(env, "dc_repo_files", {}).values():
        docs.discard(docname)


def merge_repo_files(app, env, docnames, other):
    files = getattr(env, "dc_repo_files", None)
    if files is None:
        files = env.dc_repo_files = {}
    for rel, docs in getattr(other, "dc_repo_files", {}).items():
        files.setdefault(rel, set()).update(docs & set(docnames))


def repo_page_name(rel: str) -> str:
    return f"{REPO_PAGES}/{rel}"


def resolve_repo_files(app, doctree, fromdocname):
    """Turn each ``repo_file_ref`` into a reference to the file's page (or to
    ``dc_repo_url``); outside HTML builders, into its literal."""
    for node in list(doctree.findall(repo_file_ref)):
        literal = node.children[0]
        rel, line = node["path"], node["line"]
        if app.builder.format != "html":
            node.replace_self(literal)
            continue
        if app.config.dc_repo_url:
            uri = app.config.dc_repo_url.format(path=rel, line=line or 1)
            if line and "{line}" not in app.config.dc_repo_url:
                uri += f"#L{line}"
        else:
            uri = app.builder.get_relative_uri(fromdocname, repo_page_name(rel))
            if line:
                uri += f"#L-{line}"
        ref = nodes.reference(
            "",
            "",
            literal,
            refuri=uri,
            classes=["repo-file"],
            reftitle=f"{rel} line {line}" if line else rel,
        )
        node.replace_self(ref)


def _highlight_file(app, path: Path) -> str:
    """The file as highlighted HTML, one ``<span id="L-N">`` per line."""
    code = path.read_text(errors="replace")
    lang = SOURCE_LANG.get(path.suffix, "cmake" if path.name == "CMakeLists.txt" else "none")
    return app.builder.highlighter.highlight_block(
        code, lang, linenos="inline", linespans="L", location=str(path)
    )


def repo_pages(app):
    """``html-collect-pages``: one page per file or directory that a
    ``:repo-file:`` names (and one per directory above each file, up to the
    repository root), so that every such mention links to the text it names,
    inside the site, offline."""
    if app.config.dc_repo_url or app.builder.format != "html":
        return
    wanted: set[str] = set()
    for rel, docs in sorted(getattr(app.env, "dc_repo_files", {}).items()):
        if docs:
            wanted.add(rel)
    dirs: set[str] = set()
    for rel in wanted:
        parts = Path(rel).parts
        for i in range(1, len(parts)):
            dirs.add(str(Path(*parts[:i])))
        if (REPO / rel).is_dir():
            dirs.add(rel)
    for rel in sorted(wanted | dirs):
        path = REPO / rel
        page = repo_page_name(rel)
        if path.is_dir():
            rows = []
            for child in sorted(path.iterdir()):
                crel = str(Path(rel) / child.name)
                if crel in wanted or crel in dirs:
                    uri = app.builder.get_relative_uri(page, repo_page_name(crel))
                    rows.append(
                        f'<li><a class="reference internal" href="{uri}"><code class="literal">'
                        f"{child.name}{'/' if child.is_dir() else ''}</code></a></li>"
                    )
                else:
                    rows.append(
                        f'<li><code class="literal">{child.name}'
                        f"{'/' if child.is_dir() else ''}</code></li>"
                    )
            body = (
                f"<h1>{rel}/</h1><p>A directory of the repository; the entries that the "
                "documentation "
                f"names link to their text.</p><ul>{''.join(rows)}</ul>"
            )
        else:
            body = (
                f"<h1>{rel}</h1><p>The file as it was when the site was built; line numbers are "
                f"anchors (<code>#L-N</code>).</p>{_highlight_file(app, path)}"
            )
        yield page, {"title": rel, "body": body, "parents": [], "display_toc": False}, "page.html"


# --------------------------------------------------------------- probe matrix
def _load_facts():
    """The expected table, imported from the installed package (the docs env
    has it built in); None with a reason when it is not there yet."""
    try:
        return importlib.import_module("deferred_cleanup.cpython_facts"), ""
    except Exception as exc:  # noqa: BLE001 - any import failure is reported
        return None, f"{type(exc).__name__}: {exc}"


#: The probe data of the whole matrix, committed: the version page's source
#: when build/probe/probe.json (make probe) is missing or stale.
COMMITTED_PROBE = "docs/_data/probe.json"


class ProbeMatrix(SphinxDirective):
    """Render ``build/probe/probe.json`` as one table, one column per
    interpreter; footnotes are the citations of the expected table."""

    has_content = False
    option_spec = {"json": directives.unchanged}

    def run(self):
        # tools/docs.sh names the committed copy (DC_DOCS_PROBE_JSON) when
        # build/probe/probe.json is missing or stale; a plain sphinx-build
        # falls back to it when the measured file is missing.
        path = REPO / (
            os.environ.get("DC_DOCS_PROBE_JSON")
            or self.options.get("json", "build/probe/probe.json")
        )
        if not path.exists() and not self.options.get("json"):
            path = REPO / COMMITTED_PROBE
        self.env.note_dependency(str(path))
        if not path.exists():
            raise self.error(
                f"{path.relative_to(REPO)} is missing: the version page is generated from it. "
                "Run `make probe` first (or restore the committed docs/_data/probe.json)."
            )
        data = json.loads(path.read_text())
        from dc_probe_table import render  # docs/_ext/dc_probe_table.py

        facts, why = _load_facts()
        try:
            rst, problems = render(data, facts, why)
        except ValueError as exc:
            raise self.error(f"{path.relative_to(REPO)}: {exc}") from None
        for p in problems:
            logger.warning("probe-matrix: %s", p, location=self.get_location())
        container = nodes.container(classes=["probe-matrix"])
        if path == REPO / COMMITTED_PROBE:
            stamp = data.get("provenance") if isinstance(data, dict) else None
            commit = str((stamp or {}).get("commit", ""))[:12] or "an unrecorded commit"
            rst = (
                f".. note:: This table is the committed probe data, "
                f":repo-file:`{COMMITTED_PROBE}`, measured at {commit}, not a run of this "
                "build: ``build/probe/probe.json`` was missing or older than the probe's "
                "sources. ``make probe`` measures this machine's interpreters; the next "
                "``make docs`` shows those.\n\n" + rst
            )
        self.state.nested_parse(
            StringList(rst.splitlines(), source=str(path)), self.content_offset, container
        )
        return [container]


class InterpreterRuns(SphinxDirective):
    """Render the runs saved under ``notes/interpreters/`` (tools/interpreter_run.py):
    one summary table (CPython version, configure flags, source, environment,
    suite counts, the commit measured and whether the code moved since), then
    the probe's table of those interpreters, compared with the expected table
    (a version newer than the table: with its newest row, as news)."""

    has_content = False
    option_spec = {"dir": directives.unchanged}

    def run(self):
        rel = self.options.get("dir", "notes/interpreters")
        files = sorted((REPO / rel).glob("*.json"))
        for f in files:
            self.env.note_dependency(str(f))
        if not files:
            para = nodes.paragraph(text=f"No run measured outside CI is saved ({rel} has none).")
            return [para]
        runs = [json.loads(f.read_text()) for f in files]
        sys.path.insert(0, str(REPO / "tools"))
        import provenance  # tools/provenance.py

        # One entry per run, not a table: the configure flags and the failing
        # tests' names are long literals that would widen a table past the
        # page column (the layout check of docs/check_site.py).
        rows = ["Measured here, outside CI:", ""]
        for run in runs:
            cp, su, pv = run["cpython"], run["suite"], run.get("provenance", {})
            changed = provenance.changed(pv) if pv else []
            at = f"``{pv.get('commit', '?')[:10]}``" + (" (dirty)" if pv.get("dirty") else "")
            if changed:
                at += f"; since then {len(changed)} source file(s) changed"
            suite = f"{su['passed']} passed, {su['failed']} failed, {su['skipped']} skipped"
            if su.get("failures"):
                suite += ": " + ", ".join(f"``{t}``" for t in su["failures"])
            env = f" ({run['env']})" if run.get("env") else ""
            rows += [
                f"* ``{run['tag']}``: CPython {cp['version']}{env}",
                "",
                f"  - configure: ``{cp['configure']}``",
                f"  - source: {cp['source']}",
                f"  - suite: {suite}",
                f"  - measured at {at}",
                "",
            ]
        rows.append("")
        for run in runs:
            if run.get("note"):
                rows += [f"* ``{run['tag']}``: {run['note']}"]
        rows.append("")
        from dc_probe_table import render  # docs/_ext/dc_probe_table.py

        facts, why = _load_facts()
        rst, problems = render(
            {"interpreters": [r["probe"] for r in runs]},
            facts,
            why,
            label_prefix="outside-",
            require_all=False,
        )
        for p in problems:
            logger.warning("interpreter-runs: %s", p, location=self.get_location())
        container = nodes.container(classes=["probe-matrix"])
        self.state.nested_parse(
            StringList(rows + rst.splitlines(), source=rel), self.content_offset, container
        )
        return [container]


# --------------------------------------------------------------- lost wakeup
def _machine_line(data: dict, how: str, rel: str) -> str:
    return (
        f"{how} on {data['cpu']} ({data['machine']}, {data['cpus_online']} CPUs online, "
        f"{data['kernel']}), built with {data['compiler']} ``{data.get('flags', '').strip()}``. "
        f"Rendered from :repo-file:`{rel}`."
    )


def _how(rel: str, tool: str, committed: str) -> str:
    if rel == committed:
        return f"Measured by ``make lost-wakeup`` (``{tool}``)"
    return "Re-measured by this build of the site (``tools/docs.sh`` runs ``tools/evidence.py``)"


def _load_evidence(directive, default):
    """The JSON a lost-wakeup or gate table renders: the ``:json:`` option (or
    ``default``), resolved by dc_evidence to the regenerated copy when there is
    a current one.  Returns (committed, rel, path, data); a missing file is a
    build error."""
    from dc_evidence import resolve  # docs/_ext/dc_evidence.py

    committed = directive.options.get("json", default)
    rel = resolve(committed)
    path = REPO / rel
    directive.env.note_dependency(str(path))
    if not path.exists():
        raise directive.error(f"{rel} is missing: run `make lost-wakeup` and commit it")
    return committed, rel, path, json.loads(path.read_text())


class LostWakeupTable(SphinxDirective):
    """Render the JSON of tests/cpp/lost_wakeup.cpp as a table: one row per
    variant, then the machine and compiler it ran on.  The regenerated copy
    (``build/evidence/``) when there is one, else the committed one."""

    has_content = False
    option_spec = {"json": directives.unchanged}

    def run(self):
        committed, rel, path, data = _load_evidence(self, "notes/lost-wakeup/lost-wakeup.json")
        rows = [
            "   * - variant",
            "     - handoffs",
            "     - lost wakeups",
            "     - rate",
            "     - seconds",
        ]
        for v in data["variants"]:
            n, k = v["iterations"], v["lost"]
            rows += [
                f"   * - ``{v['variant']}``",
                f"     - {n:,}",
                f"     - {k:,}",
                f"     - {k / n:.2e}" if n else "     - -",
                f"     - {v['seconds']:.1f}",
            ]
        pinned = ", ".join(sorted({str(v["pinned"]).lower() for v in data["variants"]}))
        rst = [
            ".. list-table::",
            "   :header-rows: 1",
            "",
            *rows,
            "",
            _machine_line(data, _how(rel, "tests/cpp/lost_wakeup.cpp", committed), rel)
            + f" Threads pinned: {pinned}.",
        ]
        container = nodes.container(classes=["lost-wakeup-table"])
        self.state.nested_parse(StringList(rst, source=str(path)), self.content_offset, container)
        return [container]


class GateSbTable(SphinxDirective):
    """Render the JSON of tests/cpp/gate_sb.cpp as a table: one row per
    policy (witnesses and the three other outcomes)."""

    has_content = False
    option_spec = {"json": directives.unchanged}

    def run(self):
        committed, rel, path, data = _load_evidence(self, "notes/lost-wakeup/gate-sb.json")
        head = [
            "policy",
            "iterations",
            "witnesses",
            "first at",
            "shutdown first",
            "producer first",
            "both saw",
            "seconds",
        ]
        rows = ["   * - " + head[0], *[f"     - {h}" for h in head[1:]]]
        for p in data["policies"]:
            first = f"{p['first_witness_at']:,}" if p["witnesses"] else "-"
            cells = [
                f"``{p['policy']}``",
                f"{p['iterations']:,}",
                f"{p['witnesses']:,}",
                first,
                f"{p['shutdown_first']:,}",
                f"{p['producer_first']:,}",
                f"{p['both_saw']:,}",
                f"{p['seconds']:.1f}",
            ]
            rows += ["   * - " + cells[0], *[f"     - {c}" for c in cells[1:]]]
        rst = [
            ".. list-table::",
            "   :header-rows: 1",
            "",
            *rows,
            "",
            _machine_line(data, _how(rel, "tests/cpp/gate_sb.cpp", committed), rel),
        ]
        container = nodes.container(classes=["gate-sb-table"])
        self.state.nested_parse(StringList(rst, source=str(path)), self.content_offset, container)
        return [container]


# --------------------------------------------------------------- component quotes
LITERALINCLUDE = re.compile(r"^\s*\.\.\s+literalinclude::\s*(\S+)", re.M)


class ComponentQuotes(SphinxDirective):
    """Assert that this page quotes ``<component>.hpp`` through literalinclude."""

    required_arguments = 1
    has_content = False

    def run(self):
        comp = self.arguments[0]
        header = HEADERS / f"{comp}.hpp"
        src = Path(self.env.doc2path(self.env.docname))
        quoted = [(src.parent / p).resolve() for p in LITERALINCLUDE.findall(src.read_text())]
        if not header.exists():
            logger.warning(
                "component %s: header %s does not exist yet",
                comp,
                header.relative_to(REPO),
                location=self.get_location(),
            )
        elif header.resolve() not in quoted:
            logger.warning(
                "component %s: this page does not quote its own header %s",
                comp,
                header.relative_to(REPO),
                location=self.get_location(),
            )
        return []


# --------------------------------------------------------------- API per header
BREATHE_KIND = {
    "struct": "doxygenstruct",
    "class": "doxygenclass",
    "union": "doxygenunion",
    "function": "doxygenfunction",
    "typedef": "doxygentypedef",
    "enum": "doxygenenum",
    "variable": "doxygenvariable",
    "define": "doxygendefine",
}


def header_symbols(xml_dir: Path, header: str) -> list[tuple[str, str, str]]:
    """The declarations Doxygen found in one header.

    Args:
        xml_dir (pathlib.Path): Doxygen's XML output directory.
        header (str): the header's file name, e.g. ``queue.hpp``.

    Returns:
        list[tuple[str, str, str]]: (Breathe directive, qualified name,
        argument string) for each class, struct, function, typedef, enum and
        variable located in ``deferred_cleanup/<header>``, in source order;
        overloaded functions get their argument list in the name.

    Raises:
        OSError, xml.etree.ElementTree.ParseError: unreadable XML.
    """
    import xml.etree.ElementTree as ET

    want = f"deferred_cleanup/{header}"
    index = ET.parse(xml_dir / "index.xml").getroot()
    found: list[tuple[str, int, str, str, str]] = []
    for comp in index.findall("compound"):
        kind = comp.get("kind")
        if kind in ("struct", "class", "union"):
            root = ET.parse(xml_dir / f"{comp.get('refid')}.xml").getroot().find("compounddef")
            loc = root.find("location")
            if (
                loc is not None
                and loc.get("file") == want
                and "::detail" not in root.findtext("compoundname")
            ):
                found.append(
                    (
                        loc.get("file"),
                        int(loc.get("line", 0)),
                        BREATHE_KIND[kind],
                        root.findtext("compoundname"),
                        "",
                    )
                )
        elif kind == "namespace":
            root = ET.parse(xml_dir / f"{comp.get('refid')}.xml").getroot().find("compounddef")
            for sec in root.findall("sectiondef"):
                for m in sec.findall("memberdef"):
                    loc = m.find("location")
                    if loc is None or loc.get("file") != want or m.get("kind") not in BREATHE_KIND:
                        continue
                    found.append(
                        (
                            want,
                            int(loc.get("line", 0)),
                            BREATHE_KIND[m.get("kind")],
                            m.findtext("qualifiedname"),
                            m.findtext("argsstring") or "",
                        )
                    )
    found.sort(key=lambda t: t[1])
    names = [f[3] for f in found]
    out = []
    for _, _, directive, name, args in found:
        if directive == "doxygenfunction" and names.count(name) > 1:
            name = name + re.sub(r"\s*(noexcept|const|=\s*\w+)\s*", " ", args).strip()
        out.append((directive, name, args))
    return out


def resolve_header_links(app, env, node, contnode):
    """Doxygen links a header's name mentioned in a comment ("queue.hpp") to
    the header's own page (``queue_8hpp`` or ``queue_8hpp_source``), which
    Breathe does not make.  Send those links to the header's section of the
    C++ API page instead; any other unresolved reference stays unresolved."""
    m = re.fullmatch(r"(\w+)_8hpp(?:_source)?", node.get("reftarget", ""))
    name = m[1].replace("__", "_") if m else ""  # Doxygen writes "_" in a file name as "__"
    if m is not None and not (HEADERS / f"{name}.hpp").exists():
        name = f"comparison/{name}" if (HEADERS / "comparison" / f"{name}.hpp").exists() else name
    if node.get("reftype") != "ref" or m is None or not (HEADERS / f"{name}.hpp").exists():
        return None
    from sphinx.util.nodes import make_refnode

    # The section "rearm_state.hpp" of the C++ API page has the id "rearm-state-hpp".
    return make_refnode(
        app.builder, node["refdoc"], "api/cpp", nodes.make_id(f"{name}.hpp"), contnode
    )


# The labels of the contract paragraph every public declaration carries
# (developers' guide: thread, blocking, memory ordering, errors, source).
CONTRACT_LABELS = ("Thread", "Blocking", "Memory ordering", "Errors", "Source")
CONTRACT_LABEL = re.compile(
    r"(?:(?<=^)|(?<=[.;)]\s)|(?<=[.;)]\s\s))(" + "|".join(CONTRACT_LABELS) + r"):\s+"
)


def labelled_fields(para: nodes.paragraph) -> None:
    """Split a paragraph that runs "Thread: ... Memory ordering: ... Errors:
    ... Source: ..." together into a field list, one labelled line each.

    A label counts where it starts the paragraph or a sentence (after ``.``,
    ``;`` or ``)`` and a space).  Text before the first label stays a
    paragraph; the inline nodes between two labels (links, literals) become
    the first label's field body.  The field list has the class
    ``dc-contract`` (the browser check looks for it).  A paragraph without a
    label is left alone.

    Args:
        para (docutils.nodes.paragraph): a paragraph of the C++ API page.

    Returns:
        None: the paragraph is replaced in its parent.

    Raises:
        Nothing.
    """
    if not CONTRACT_LABEL.search(para.astext()):
        return
    segments: list[tuple[str | None, list[nodes.Node]]] = [(None, [])]
    for child in list(para.children):
        if not isinstance(child, nodes.Text):
            segments[-1][1].append(child.deepcopy())
            continue
        text, pos = str(child), 0
        for m in CONTRACT_LABEL.finditer(text):
            before = text[pos : m.start()]
            if before:
                segments[-1][1].append(nodes.Text(before))
            segments.append((m[1], []))
            pos = m.end()
        if text[pos:]:
            segments[-1][1].append(nodes.Text(text[pos:]))
    out: list[nodes.Node] = []
    lead = segments[0][1]
    if any(n.astext().strip() for n in lead):
        out.append(nodes.paragraph("", "", *lead))
    fields = nodes.field_list(classes=["dc-contract"])
    for label, body in segments[1:]:
        if body and isinstance(body[-1], nodes.Text):
            body[-1] = nodes.Text(str(body[-1]).rstrip())
        field = nodes.field(
            "", nodes.field_name("", label), nodes.field_body("", nodes.paragraph("", "", *body))
        )
        fields += field
    out.append(fields)
    para.replace_self(out)


class DoxygenHeader(SphinxDirective):
    """``.. doxygen-header:: queue.hpp``: Breathe directives for every
    declaration Doxygen found in that header (members of classes included)."""

    required_arguments = 1
    has_content = False

    def run(self):
        header = self.arguments[0]
        xml_dir = Path(self.config.breathe_projects[self.config.breathe_default_project])
        self.env.note_dependency(str(HEADERS / header))
        if not (HEADERS / header).exists():
            raise self.error(f"doxygen-header: {HEADERS.relative_to(REPO) / header} does not exist")
        symbols = header_symbols(xml_dir, header)
        if not symbols:
            raise self.error(f"doxygen-header: Doxygen documented nothing in {header}")
        lines: list[str] = []
        for directive, name, _ in symbols:
            lines.append(f".. {directive}:: {name}")
            if directive in ("doxygenstruct", "doxygenclass", "doxygenunion"):
                lines.append("   :members:")
            lines.append("")
        container = nodes.container(classes=["doxygen-header"])
        self.state.nested_parse(
            StringList(lines, source=f"<doxygen-header {header}>"), self.content_offset, container
        )
        for para in list(container.findall(nodes.paragraph)):
            if para.parent is not None and not isinstance(para.parent, nodes.field_body):
                labelled_fields(para)
        link_essay_mentions(container, header, self.env)
        return container.children


# A header's comments say "see the essay above": the essay is the header's
# opening comment, which this page does not show; its design page explains it.
ESSAY_MENTION = re.compile(r"\b(the essay above)")
ESSAY_PAGE = {"policy.hpp": "design/variants", "driver.hpp": "design/variants"}


def essay_doc(header: str, env) -> str:
    """The page that explains ``header``'s opening essay."""
    doc = ESSAY_PAGE.get(header, f"design/{Path(header).stem}")
    return doc if doc in env.found_docs else "design/index"


def link_essay_mentions(root: nodes.Node, header: str, env) -> None:
    """Turn each "the essay above" in ``root``'s text into a link to the
    design page of ``header`` (the API page shows no essay above)."""
    target = essay_doc(header, env)
    for text in list(root.findall(nodes.Text)):
        parent = text.parent
        if parent is None or isinstance(
            parent, (nodes.literal, nodes.reference, addnodes.pending_xref)
        ):
            continue
        parts = ESSAY_MENTION.split(text.astext())
        if len(parts) == 1:
            continue
        new: list[nodes.Node] = []
        for i, part in enumerate(parts):
            if i % 2 == 0:
                if part:
                    new.append(nodes.Text(part))
                continue
            ref = addnodes.pending_xref(
                "",
                refdomain="std",
                reftype="doc",
                reftarget="/" + target,
                refexplicit=True,
                refwarn=True,
            )
            ref += nodes.inline("", f"the essay of {header}")
            new.append(ref)
        idx = parent.index(text)
        parent.remove(text)
        for j, n in enumerate(new):
            parent.insert(idx + j, n)


def drop_empty_bases(app, doctree) -> None:
    """``doctree-read``: autodoc writes "Bases:" even when
    :func:`hide_pybind_base` removed every base (a pybind11 class whose only
    base is ``pybind11_object``); drop that empty line."""
    for para in list(doctree.findall(nodes.paragraph)):
        if para.astext().strip() == "Bases:" and para.parent is not None:
            para.parent.remove(para)


# --------------------------------------------------------------- include graph
#: Headers the include graph leaves out: no component of the design.
NOT_COMPONENTS = frozenset(
    {"deferred_cleanup.hpp", "version.hpp", "visibility.hpp", "policies.hpp"}
)


def include_graph_dot(xml_dir: Path) -> str:
    """The headers' ``#include`` graph as graphviz code.

    Args:
        xml_dir (pathlib.Path): Doxygen's XML output directory.

    Returns:
        str: a digraph with one node per component header (linking to its
        section of the C++ API page) and an edge A -> B when A includes B,
        read from Doxygen's file compounds.  Left out (:data:`NOT_COMPONENTS`):
        the umbrella header, the version and visibility macros every header
        may include, and the comparison policies, which are no component.

    Raises:
        OSError, xml.etree.ElementTree.ParseError: unreadable XML.
    """
    import xml.etree.ElementTree as ET

    index = ET.parse(xml_dir / "index.xml").getroot()
    names, edges = [], []
    for comp in index.findall("compound"):
        if comp.get("kind") != "file":
            continue
        root = ET.parse(xml_dir / f"{comp.get('refid')}.xml").getroot().find("compounddef")
        name = root.findtext("compoundname")
        if not name.endswith(".hpp") or name in NOT_COMPONENTS:
            continue
        names.append(name)
        for inc in root.findall("includes"):
            if inc.get("refid") and Path(inc.text).name not in NOT_COMPONENTS:
                edges.append((name, Path(inc.text).name))
    out = [
        "digraph includes {",
        "rankdir=BT; bgcolor=white; pad=0.15; nodesep=0.3; ranksep=0.4;",
        'node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontsize=12];',
        'edge [color="#5b6b7b", arrowsize=0.7];',
    ]
    # The section ids of the C++ API page ("rearm_state.hpp" -> "rearm-state-hpp").
    out += [
        f'"{n}" [href="../api/cpp.html#{nodes.make_id(n)}", target="_top"];' for n in sorted(names)
    ]
    out += [f'"{a}" -> "{b}";' for a, b in sorted(set(edges))]
    out.append("}")
    return "\n".join(out)


class IncludeGraph(SphinxDirective):
    """``.. include-graph::``: the headers and which includes which."""

    has_content = False
    option_spec = {"alt": directives.unchanged, "caption": directives.unchanged}

    def run(self):
        from sphinx.ext.graphviz import figure_wrapper, graphviz

        xml_dir = Path(self.config.breathe_projects[self.config.breathe_default_project])
        node = graphviz()
        node["code"] = include_graph_dot(xml_dir)
        node["options"] = {"docname": self.env.docname}
        node["alt"] = self.options.get("alt", "the headers' include graph")
        if "caption" in self.options:
            return [figure_wrapper(self, node, self.options["caption"])]
        return [node]


# --------------------------------------------------------------- sequence diagrams
SEQ_LANE = re.compile(r"^lane\s+(?P<key>\w+)\s*:\s*(?P<label>.+)$")
SEQ_MSG = re.compile(r"^(?P<a>\w+)\s*->\s*(?P<b>\w+)\s*:\s*(?P<text>.+)$")


def _dot_str(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\\\\n", "\\n")


def sequence_to_dot(lines: list[str]) -> str:
    """Turn a sequence description into graphviz code.

    Args:
        lines (list[str]): ``lane KEY: Label`` lines (``\\n`` breaks a
            label), then ``A -> B: text`` messages (``A -> A`` is a step
            within one lane); blank lines and ``#`` comments are skipped.

    Returns:
        str: graphviz code laid out by neato with every node pinned: lanes
        are columns (1.75 inches apart), messages are rows, top to bottom;
        message text is 14 pt, so that the diagram, scaled to the page
        column, stays legible (the browser check measures it).

    Raises:
        ValueError: a line that is neither, or a message naming an unknown
        lane.
    """
    lanes: list[tuple[str, str]] = []
    msgs: list[tuple[str, str, str]] = []
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if m := SEQ_LANE.match(line):
            lanes.append((m["key"], m["label"]))
        elif m := SEQ_MSG.match(line):
            msgs.append((m["a"], m["b"], m["text"]))
        else:
            raise ValueError(f"sequence: cannot parse {line!r}")
    col = {k: i for i, (k, _) in enumerate(lanes)}
    for a, b, _ in msgs:
        for k in (a, b):
            if k not in col:
                raise ValueError(f"sequence: unknown lane {k!r}")
    # Sizes: the diagram is scaled to the page column (about 10.5 inches of
    # graphviz points into 736 CSS px, furo's content width), so lanes sit
    # close and the text is large: 14 pt messages render at about 13.5 px.
    width, step = 1.75, 0.55
    msg_pt, lane_pt = 14, 13
    char_in = msg_pt * 0.55 / 72  # average glyph width of DejaVu Sans, in inches
    bottom = -(len(msgs) + 1) * step - 0.25
    out = [
        "digraph sequence {",
        "layout=neato; inputscale=1; splines=line; outputorder=edgesfirst; bgcolor=white; pad=0.1;",
        f'node [shape=point, width=0.02, height=0.02, label="", fontsize={lane_pt}];',
        "edge [arrowsize=0.7];",
    ]
    box = 'shape=box, style="rounded,filled", fillcolor="#eef3fb", width=1.6, margin="0.05,0.03"'
    for k, label in lanes:
        x = col[k] * width
        out.append(f'{k}_head [pos="{x},0!", {box}, height=0.5, label="{_dot_str(label)}"];')
        foot = label.split("\\n")[0]
        out.append(f'{k}_foot [pos="{x},{bottom}!", {box}, height=0.3, label="{_dot_str(foot)}"];')
        out.append(f'{k}_head -> {k}_foot [style=dashed, color="#9aa5b1", arrowhead=none];')
    for i, (a, b, text) in enumerate(msgs):
        y = -(i + 1) * step - 0.25  # clear of the lane heads
        t = _dot_str(text)
        if a == b:
            x = col[a] * width
            out.append(
                f'm{i}a [pos="{x},{y + 0.08}!"]; m{i}b [pos="{x + 0.3},{y + 0.08}!"]; '
                f'm{i}c [pos="{x + 0.3},{y - 0.08}!"]; m{i}d [pos="{x},{y - 0.08}!"];'
            )
            out.append(
                f"m{i}a -> m{i}b [arrowhead=none]; m{i}b -> m{i}c [arrowhead=none]; m{i}c -> m{i}d;"
            )
            out.append(
                f'm{i}t [pos="{x + 0.4 + char_in * len(text) / 2:.3f},{y}!", '
                f'shape=plaintext, width=0, height=0, margin=0, fontsize={msg_pt}, label="{t}"];'
            )
        else:
            xa, xb = col[a] * width, col[b] * width
            out.append(f'm{i}a [pos="{xa},{y}!"]; m{i}b [pos="{xb},{y}!"]; m{i}a -> m{i}b;')
            out.append(
                f'm{i}t [pos="{(xa + xb) / 2},{y + 0.16}!", shape=plaintext, width=0, height=0, '
                f'margin=0, fontsize={msg_pt}, label="{t}"];'
            )
    out.append("}")
    return "\n".join(out)


class Sequence(SphinxDirective):
    """``.. sequence::`` with lanes and messages as content; ``:alt:`` text."""

    has_content = True
    option_spec = {"alt": directives.unchanged, "caption": directives.unchanged}

    def run(self):
        from sphinx.ext.graphviz import figure_wrapper, graphviz

        try:
            code = sequence_to_dot(list(self.content))
        except ValueError as exc:
            raise self.error(str(exc)) from None
        node = graphviz()
        node["code"] = code
        node["options"] = {"docname": self.env.docname}
        node["alt"] = self.options.get("alt", "sequence diagram")
        self.add_name(node)
        if "caption" in self.options:
            return [figure_wrapper(self, node, self.options["caption"])]
        return [node]


# --------------------------------------------------------------- citations as links
# A mention of a CPython issue or pull request, or of a cuda-python one, in
# running text, in text that Doxygen, autodoc or MyST produced, or in a quoted
# header: each becomes a link, with the URL patterns of conf.py's ``extlinks``
# (the roles :gh:, :bpo:, :cpython-pr:, :cuda-pr:, :cuda-issue:).  Order
# matters: "cuda-python PR #N" before a bare "PR #N", which in these pages is
# always a CPython pull request (next to its gh-/bpo- number).
CITATION = re.compile(
    r"(?P<cuda_pr>cuda-python PR #(?P<n1>\d+))"
    r"|(?P<cuda_issue>cuda-python issue #(?P<n2>\d+))"
    r"|(?P<gh>\b[Gg][Hh]-(?P<n3>\d+))"
    r"|(?P<bpo>\bbpo-(?P<n4>\d+))"
    r"|(?P<cpython_pr>\bPR #(?P<n5>\d+))"
)
CITATION_ROLE = {
    "cuda_pr": ("cuda-pr", "n1"),
    "cuda_issue": ("cuda-issue", "n2"),
    "gh": ("gh", "n3"),
    "bpo": ("bpo", "n4"),
    "cpython_pr": ("cpython-pr", "n5"),
}
NO_AUTOLINK = (
    nodes.reference,
    nodes.literal_block,
    nodes.raw,
    nodes.comment,
    nodes.target,
    nodes.FixedTextElement,
    addnodes.desc_signature,
    addnodes.pending_xref,
    addnodes.toctree,
)


def citation_url(config, match: re.Match) -> str | None:
    """The URL of one citation match, from conf.py's ``extlinks``; None when
    the project defines no such role (then the mention stays text)."""
    kind = (
        match.lastgroup
        if match.lastgroup in CITATION_ROLE
        else next(k for k in CITATION_ROLE if match.group(k))
    )
    role, num = CITATION_ROLE[kind]
    pattern = (getattr(config, "extlinks", None) or {}).get(role)
    return pattern[0] % match.group(num) if pattern else None


def link_citations(app, doctree, fromdocname) -> None:
    """``doctree-resolved``: turn every plain-text citation (see
    ``CITATION``) into a reference to its public page.  Code blocks (handled
    on the HTML by ``rewrite_html``), existing links and signatures are left
    alone; a link in a section title is fine (tables of contents keep only
    its text)."""
    for text in list(doctree.findall(nodes.Text)):
        parent = text.parent
        if parent is None or not CITATION.search(str(text)):
            continue
        anc, skip = parent, False
        while anc is not None:
            if isinstance(anc, NO_AUTOLINK):
                skip = True
                break
            anc = anc.parent
        if skip:
            continue
        if isinstance(parent, nodes.literal):
            # Inline code that is exactly one citation: link the whole literal.
            m = CITATION.fullmatch(parent.astext().strip())
            if (
                m
                and citation_url(app.config, m)
                and parent.parent is not None
                and not isinstance(parent.parent, NO_AUTOLINK)
            ):
                parent.replace_self(
                    nodes.reference(
                        "",
                        "",
                        parent.deepcopy(),
                        refuri=citation_url(app.config, m),
                        classes=["dc-citation"],
                    )
                )
            continue
        out: list[nodes.Node] = []
        pos, src = 0, str(text)
        for m in CITATION.finditer(src):
            url = citation_url(app.config, m)
            if url is None:
                continue
            if m.start() > pos:
                out.append(nodes.Text(src[pos : m.start()]))
            out.append(nodes.reference(m.group(0), m.group(0), refuri=url, classes=["dc-citation"]))
            pos = m.end()
        if pos < len(src):
            out.append(nodes.Text(src[pos:]))
        parent.replace(text, out)


def _link_text_segments(html_text: str, config) -> str:
    """Link citations in the text between tags of an HTML fragment."""
    out = []
    inside_a = 0
    for tok in re.split(r"(<[^>]*>)", html_text):
        if tok.startswith("<"):
            if re.match(r"<a[\s>]", tok):
                inside_a += 1
            elif tok.startswith("</a"):
                inside_a = max(0, inside_a - 1)
            out.append(tok)
        elif inside_a or not CITATION.search(tok):
            out.append(tok)
        else:
            out.append(
                CITATION.sub(
                    lambda m: (
                        f'<a class="reference external dc-citation" '
                        f'href="{citation_url(config, m)}">{m.group(0)}</a>'
                        if citation_url(config, m)
                        else m.group(0)
                    ),
                    tok,
                )
            )
    return "".join(out)


def _wbr_in_contract_tables(body: str) -> str:
    """In the contract table, let identifiers break after ``_`` or ``::``
    (``<wbr>``), never inside a word."""

    def table(m: re.Match) -> str:
        return re.sub(
            r'(<span class="pre">)([^<]*)(</span>)',
            lambda s: s[1] + re.sub(r"(::|_)(?=\w)", r"\1<wbr>", s[2]) + s[3],
            m[0],
        )

    return re.sub(r'<table class="[^"]*\bcontract\b.*?</table>', table, body, flags=re.S)


def rewrite_html(app, pagename, templatename, context, doctree) -> None:
    """``html-page-context``: link citations inside code blocks (``<pre>``:
    quoted headers and the files' own pages), and insert word-break
    opportunities into the contract table's identifiers."""
    body = context.get("body")
    if not body:
        return
    body = re.sub(
        r"(<pre[^>]*>)(.*?)(</pre>)",
        lambda m: m[1] + _link_text_segments(m[2], app.config) + m[3],
        body,
        flags=re.S,
    )
    context["body"] = _wbr_in_contract_tables(body)


# --------------------------------------------------------------- the contract table
def contract_row_ids(app, doctree) -> None:
    """``doctree-read``: give each body row of a ``contract`` table an id,
    ``contract-`` and the first name of its first cell (``contract-drain-now``),
    put a permalink (¶) in that cell, and register the id as a label, so that
    other pages can link a row with ``:ref:``."""
    std = app.env.domains.standard_domain
    docname = app.env.docname
    for table in doctree.findall(nodes.table):
        if "contract" not in table["classes"]:
            continue
        for tbody in table.findall(nodes.tbody):
            for row in tbody.findall(nodes.row):
                first = row.children[0]
                name = re.split(r"[\s,(]", first.astext().strip().split("::")[-1], maxsplit=1)[0]
                name = name.split(".")[-1] or "row"
                rid = nodes.make_id("contract-" + name)
                if rid in doctree.ids:
                    continue
                row["ids"].append(rid)
                doctree.ids[rid] = row
                title = first.astext().strip().replace("\n", " ")
                std.anonlabels[rid] = (docname, rid)
                std.labels[rid] = (docname, rid, title)
                link = nodes.reference(
                    "",
                    "\u00b6",
                    refid=rid,
                    classes=["headerlink", "dc-row-link"],
                    reftitle="Link to this row",
                )
                para = (
                    first.children[-1]
                    if first.children and isinstance(first.children[-1], nodes.paragraph)
                    else None
                )
                if para is not None:
                    para += nodes.Text(" ")
                    para += link


# --------------------------------------------------------------- Python API
def _public_signature(obj, name: str) -> re.Match | None:
    """The hand-written signature of a pybind11 function, if it has one.

    pybind11 puts a generated signature on the first line of ``__doc__``, in
    the extension module's private names (``deferred_cleanup._native.Graph``,
    ``typing.SupportsInt``); the package's docstrings follow it with one in
    the public names (``attach(obj: object, finalizer: Callable[[object],
    None] | None = None) -> None``).  Returns the match of that second line
    (groups ``args`` and ``ret``), or None."""
    doc = getattr(obj, "__doc__", None)
    if not isinstance(doc, str):
        return None
    lines = [ln.strip() for ln in doc.splitlines() if ln.strip()]
    short = name.rsplit(".", 1)[-1]
    if (
        len(lines) < 2
        or not lines[0].startswith(short + "(")
        or "_native." not in lines[0] + lines[1]
        and not lines[1].startswith(short + "(")
    ):
        return None
    return re.fullmatch(rf"{re.escape(short)}\((?P<args>.*)\)(?:\s*->\s*(?P<ret>.+))?", lines[1])


def public_signature(app, what, name, obj, options, signature, return_annotation):
    """``autodoc-process-signature``: show a pybind11 function once, with the
    signature its docstring gives in public types (see
    :func:`_public_signature`), instead of pybind11's own."""
    m = _public_signature(obj, name)
    if m is None:
        return None
    return f"({m['args']})", m["ret"]


def drop_signature_lines(app, what, name, obj, options, lines: list[str]) -> None:
    """``autodoc-process-docstring``: remove the public signature line that
    :func:`public_signature` moved into the heading, so it is not shown twice."""
    if _public_signature(obj, name) is None:
        return
    short = name.rsplit(".", 1)[-1]
    for i, line in enumerate(lines):
        if line.strip().startswith(short + "("):
            del lines[i]
            while i < len(lines) and not lines[i].strip():
                del lines[i]
            return


def hide_pybind_base(app, name, obj, options, bases: list) -> None:
    """``autodoc-process-bases``: pybind11's common base class is an
    implementation detail, not part of the API."""
    bases[:] = [b for b in bases if getattr(b, "__name__", "") != "pybind11_object"]


def raises_nothing(app, what, name, obj, options, lines: list[str]) -> None:
    """The package's docstrings say ``Raises:`` / ``Nothing.`` when a function
    raises nothing; napoleon would read "Nothing." as an exception type.  Turn
    that section into a plain sentence before napoleon sees it."""
    i = 0
    while i < len(lines) - 1:
        if lines[i].strip() == "Raises:" and lines[i + 1].strip().startswith("Nothing"):
            indent = len(lines[i + 1]) - len(lines[i + 1].lstrip())
            j = i + 1
            body = []
            while j < len(lines) and (
                not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) >= indent
            ):
                if not lines[j].strip() and (
                    j + 1 >= len(lines) or not lines[j + 1].startswith(" " * indent)
                ):
                    break
                body.append(lines[j].strip())
                j += 1
            text = " ".join(b for b in body if b)
            lines[i:j] = [":Raises: " + text[0].lower() + text[1:]]
        i += 1


class CPythonChanged(SphinxDirective):
    """``.. cpython-changed:: 3.13``: a ``versionchanged`` note about CPython's
    behaviour, labelled "Changed in CPython 3.13" (the plain directive's
    "Changed in version" would read as this project's version)."""

    has_content = True
    required_arguments = 1
    optional_arguments = 1
    final_argument_whitespace = True

    def run(self):
        from sphinx.domains.changeset import VersionChange

        inner = VersionChange(
            "versionchanged",
            self.arguments,
            self.options,
            self.content,
            self.lineno,
            self.content_offset,
            self.block_text,
            self.state,
            self.state_machine,
        )
        out = inner.run()
        for node in out:
            for label in node.findall(nodes.inline):
                if "versionmodified" in label["classes"]:
                    label.clear()
                    label += nodes.Text(f"Changed in CPython {self.arguments[0]}: ")
                    break
        return out


def setup(app: Sphinx):
    app.setup_extension("sphinx.ext.autodoc")  # for autodoc-process-docstring below
    app.setup_extension("sphinx.ext.graphviz")  # the sequence directive makes graphviz nodes
    app.add_config_value(
        "dc_doxygen_input",
        [str(HEADERS), str(HEADERS / "comparison"), str(REPO / "docs" / "namespace.dox")],
        "env",
    )
    app.add_config_value("dc_doxygen_output", str(REPO / "build" / "docs" / "doxygen"), "env")
    app.connect("builder-inited", run_doxygen)
    app.add_role("repo-file", repo_file_role)
    app.add_node(repo_file_ref)
    app.add_config_value("dc_repo_url", "", "env")
    app.connect("env-purge-doc", purge_repo_files)
    app.connect("env-merge-info", merge_repo_files)
    app.connect("doctree-resolved", resolve_repo_files)
    app.connect("html-collect-pages", repo_pages)
    app.add_directive("probe-matrix", ProbeMatrix)
    app.add_directive("interpreter-runs", InterpreterRuns)
    app.add_directive("component-quotes", ComponentQuotes)
    app.add_directive("lost-wakeup-table", LostWakeupTable)
    app.add_directive("gate-sb-table", GateSbTable)
    app.setup_extension("dc_evidence")  # provenance notices, literalinclude of regenerated data
    app.add_directive("sequence", Sequence)
    app.add_directive("doxygen-header", DoxygenHeader)
    app.add_directive("include-graph", IncludeGraph)
    app.add_directive("cpython-changed", CPythonChanged)
    app.setup_extension(
        "dc_gpu_compare"
    )  # the gpu-compare-table directive (docs/_ext/dc_gpu_compare.py)
    app.connect("missing-reference", resolve_header_links)
    app.connect("doctree-resolved", link_citations)
    app.connect("html-page-context", rewrite_html)
    app.connect("doctree-read", contract_row_ids)
    app.connect("doctree-read", drop_empty_bases)
    app.connect("autodoc-process-docstring", raises_nothing, priority=400)  # before napoleon (500)
    app.connect("autodoc-process-docstring", drop_signature_lines, priority=300)
    app.connect("autodoc-process-signature", public_signature)
    app.connect("autodoc-process-bases", hide_pybind_base)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
