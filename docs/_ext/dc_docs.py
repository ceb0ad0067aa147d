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
* ``.. component-quotes:: NAME``: checks that the header
  ``reference/include/deferred_cleanup/NAME.hpp`` is quoted by the page that
  uses it (each component page quotes its own header), then renders nothing.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
HEADERS = REPO / "reference" / "include" / "deferred_cleanup"
DOXYGEN_WARNING = re.compile(r"^(?P<file>[^:\s][^:]*):(?P<line>\d+): (?P<text>.*)$")


# --------------------------------------------------------------- Doxygen
def run_doxygen(app: Sphinx) -> None:
    """Run Doxygen (``docs/Doxyfile``, with INPUT and OUTPUT_DIRECTORY taken
    from ``dc_doxygen_input`` / ``dc_doxygen_output``) and turn each of its
    warnings into a Sphinx warning (type ``doxygen``) at the header's line."""
    exe = shutil.which("doxygen")
    if exe is None:
        raise ExtensionError("doxygen is not installed: `make docs` (tools/docs.sh) installs it with apt-get")
    out = Path(app.config.dc_doxygen_output)
    if out.exists():
        shutil.rmtree(out)  # stale XML of a removed declaration must not survive
    out.mkdir(parents=True)
    inputs = " ".join(f'"{Path(p)}"' for p in app.config.dc_doxygen_input)
    config = (f'@INCLUDE = "{REPO / "docs" / "Doxyfile"}"\n'
              f"INPUT = {inputs}\n"
              f'OUTPUT_DIRECTORY = "{out}"\n')
    proc = subprocess.run([exe, "-"], input=config, cwd=REPO, capture_output=True, text=True, timeout=300)
    lines = [l for l in (proc.stderr + proc.stdout).splitlines() if l.strip()]
    # One message per "file:line: warning|error: text"; indented lines that
    # follow belong to it (e.g. the list of undocumented parameters).
    messages: list[tuple[str | None, str]] = []
    for line in lines:
        m = DOXYGEN_WARNING.match(line)
        if m and re.match(r"(warning|error):", m["text"]):
            path = Path(m["file"])
            where = str(path.relative_to(REPO)) if path.is_absolute() and path.is_relative_to(REPO) else str(path)
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
    logger.info("doxygen: XML in %s (%d warning(s))", out / "xml", warned)


# --------------------------------------------------------------- :repo-file:
def repo_file_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``:repo-file:`tests/litmus/sb.litmus``` -> a literal; a warning when
    the path does not exist.  ``path::NAME`` (a test function, a model check)
    also requires NAME to occur in that file as a whole word."""
    ref = text.strip()
    rel, _, symbol = ref.partition("::")
    node = nodes.literal(rawtext, ref, classes=["repo-file"])
    path = REPO / rel
    if not path.exists():
        return [node], [inliner.reporter.warning(f"repo-file: {rel} does not exist in the repository", line=lineno)]
    if symbol and (not path.is_file() or not re.search(rf"\b{re.escape(symbol)}\b", path.read_text(errors="replace"))):
        return [node], [inliner.reporter.warning(f"repo-file: {rel} has no {symbol!r}", line=lineno)]
    return [node], []


# --------------------------------------------------------------- probe matrix
def _load_facts():
    """The expected table, imported from the installed package (the docs env
    has it built in); None with a reason when it is not there yet."""
    try:
        return importlib.import_module("deferred_cleanup.cpython_facts"), ""
    except Exception as exc:  # noqa: BLE001 - any import failure is reported
        return None, f"{type(exc).__name__}: {exc}"


class ProbeMatrix(SphinxDirective):
    """Render ``build/probe/probe.json`` as one table, one column per
    interpreter; footnotes are the citations of the expected table."""

    has_content = False
    option_spec = {"json": directives.unchanged}

    def run(self):
        path = REPO / self.options.get("json", "build/probe/probe.json")
        self.env.note_dependency(str(path))
        if not path.exists():
            raise self.error(
                f"{path.relative_to(REPO)} is missing: the version page is generated from it. "
                "Run `make probe` first (`make docs`, i.e. tools/docs.sh, runs it for you).")
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
        self.state.nested_parse(StringList(rst.splitlines(), source=str(path)), self.content_offset, container)
        return [container]


# --------------------------------------------------------------- lost wakeup
class LostWakeupTable(SphinxDirective):
    """Render the JSON of ``make lost-wakeup`` (tests/cpp/lost_wakeup.cpp) as a
    table: one row per variant, then the machine and compiler it ran on."""

    has_content = False
    option_spec = {"json": directives.unchanged}

    def run(self):
        rel = self.options.get("json", "notes/lost-wakeup/lost-wakeup.json")
        path = REPO / rel
        self.env.note_dependency(str(path))
        if not path.exists():
            raise self.error(f"{rel} is missing: run `make lost-wakeup` and commit it")
        data = json.loads(path.read_text())
        rows = ["   * - variant", "     - handoffs", "     - lost wakeups", "     - rate",
                "     - seconds"]
        for v in data["variants"]:
            n, k = v["iterations"], v["lost"]
            rows += [f"   * - ``{v['variant']}``", f"     - {n:,}", f"     - {k:,}",
                     f"     - {k / n:.2e}" if n else "     - -", f"     - {v['seconds']:.1f}"]
        rst = [".. list-table::", "   :header-rows: 1", "", *rows, "",
               f"Measured by ``make lost-wakeup`` on {data['cpu']} ({data['machine']}, "
               f"{data['cpus_online']} CPUs online, {data['kernel']}), built with "
               f"{data['compiler']} ``{data.get('flags', '').strip()}``; "
               f"threads pinned: {', '.join(sorted({str(v['pinned']).lower() for v in data['variants']}))}. "
               f"Source: :repo-file:`{rel}`."]
        container = nodes.container(classes=["lost-wakeup-table"])
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
            logger.warning("component %s: header %s does not exist yet", comp, header.relative_to(REPO),
                           location=self.get_location())
        elif header.resolve() not in quoted:
            logger.warning("component %s: this page does not quote its own header %s", comp,
                           header.relative_to(REPO), location=self.get_location())
        return []


# --------------------------------------------------------------- API per header
BREATHE_KIND = {"struct": "doxygenstruct", "class": "doxygenclass", "union": "doxygenunion",
                "function": "doxygenfunction", "typedef": "doxygentypedef", "enum": "doxygenenum",
                "variable": "doxygenvariable", "define": "doxygendefine"}


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
            if loc is not None and loc.get("file") == want and "::detail" not in root.findtext("compoundname"):
                found.append((loc.get("file"), int(loc.get("line", 0)), BREATHE_KIND[kind],
                              root.findtext("compoundname"), ""))
        elif kind == "namespace":
            root = ET.parse(xml_dir / f"{comp.get('refid')}.xml").getroot().find("compounddef")
            for sec in root.findall("sectiondef"):
                for m in sec.findall("memberdef"):
                    loc = m.find("location")
                    if loc is None or loc.get("file") != want or m.get("kind") not in BREATHE_KIND:
                        continue
                    found.append((want, int(loc.get("line", 0)), BREATHE_KIND[m.get("kind")],
                                  m.findtext("qualifiedname"), m.findtext("argsstring") or ""))
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
    if node.get("reftype") != "ref" or m is None or not (HEADERS / f"{m[1]}.hpp").exists():
        return None
    from sphinx.util.nodes import make_refnode

    return make_refnode(app.builder, node["refdoc"], "api/cpp", f"{m[1]}-hpp", contnode)


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
        self.state.nested_parse(StringList(lines, source=f"<doxygen-header {header}>"), self.content_offset,
                                container)
        return container.children


# --------------------------------------------------------------- include graph
def include_graph_dot(xml_dir: Path) -> str:
    """The headers' ``#include`` graph as graphviz code.

    Args:
        xml_dir (pathlib.Path): Doxygen's XML output directory.

    Returns:
        str: a digraph with one node per header (linking to its section of
        the C++ API page) and an edge A -> B when A includes B, read from
        Doxygen's file compounds.

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
        if not name.endswith(".hpp"):
            continue
        names.append(name)
        for inc in root.findall("includes"):
            if inc.get("refid"):
                edges.append((name, Path(inc.text).name))
    out = ["digraph includes {", "rankdir=BT; bgcolor=white; pad=0.15; nodesep=0.3; ranksep=0.4;",
           'node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontsize=12];',
           'edge [color="#5b6b7b", arrowsize=0.7];']
    out += [f'"{n}" [href="../api/cpp.html#{n.replace(".", "-")}", target="_top"];' for n in sorted(names)]
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
        are columns (2.5 inches apart), messages are rows, top to bottom.

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
    width, step = 2.5, 0.5
    bottom = -(len(msgs) + 1) * step - 0.2
    out = ["digraph sequence {",
           "layout=neato; inputscale=1; splines=line; outputorder=edgesfirst; bgcolor=white; pad=0.15;",
           'node [shape=point, width=0.02, height=0.02, label="", fontsize=13];',
           "edge [arrowsize=0.6];"]
    box = 'shape=box, style="rounded,filled", fillcolor="#eef3fb", width=2.0'
    for k, label in lanes:
        x = col[k] * width
        out.append(f'{k}_head [pos="{x},0!", {box}, height=0.5, label="{_dot_str(label)}"];')
        foot = label.split("\\n")[0]
        out.append(f'{k}_foot [pos="{x},{bottom}!", {box}, height=0.3, label="{_dot_str(foot)}"];')
        out.append(f'{k}_head -> {k}_foot [style=dashed, color="#9aa5b1", arrowhead=none];')
    for i, (a, b, text) in enumerate(msgs):
        y = -(i + 1) * step - 0.2  # clear of the lane heads
        t = _dot_str(text)
        if a == b:
            x = col[a] * width
            out.append(f'm{i}a [pos="{x},{y + 0.08}!"]; m{i}b [pos="{x + 0.3},{y + 0.08}!"]; '
                       f'm{i}c [pos="{x + 0.3},{y - 0.08}!"]; m{i}d [pos="{x},{y - 0.08}!"];')
            out.append(f"m{i}a -> m{i}b [arrowhead=none]; m{i}b -> m{i}c [arrowhead=none]; m{i}c -> m{i}d;")
            out.append(f'm{i}t [pos="{x + 0.4 + 0.045 * len(text)},{y}!", shape=plaintext, width=0, height=0, '
                       f'margin=0, fontsize=12, label="{t}"];')
        else:
            xa, xb = col[a] * width, col[b] * width
            out.append(f'm{i}a [pos="{xa},{y}!"]; m{i}b [pos="{xb},{y}!"]; m{i}a -> m{i}b;')
            out.append(f'm{i}t [pos="{(xa + xb) / 2},{y + 0.14}!", shape=plaintext, width=0, height=0, '
                       f'margin=0, fontsize=12, label="{t}"];')
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
            while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) >= indent):
                if not lines[j].strip() and (j + 1 >= len(lines) or not lines[j + 1].startswith(" " * indent)):
                    break
                body.append(lines[j].strip())
                j += 1
            text = " ".join(b for b in body if b)
            lines[i:j] = [":Raises: " + text[0].lower() + text[1:]]
        i += 1


def setup(app: Sphinx):
    app.setup_extension("sphinx.ext.autodoc")  # for autodoc-process-docstring below
    app.setup_extension("sphinx.ext.graphviz")  # the sequence directive makes graphviz nodes
    app.add_config_value("dc_doxygen_input", [str(HEADERS), str(REPO / "docs" / "namespace.dox")], "env")
    app.add_config_value("dc_doxygen_output", str(REPO / "build" / "docs" / "doxygen"), "env")
    app.connect("builder-inited", run_doxygen)
    app.add_role("repo-file", repo_file_role)
    app.add_directive("probe-matrix", ProbeMatrix)
    app.add_directive("component-quotes", ComponentQuotes)
    app.add_directive("lost-wakeup-table", LostWakeupTable)
    app.add_directive("sequence", Sequence)
    app.add_directive("doxygen-header", DoxygenHeader)
    app.add_directive("include-graph", IncludeGraph)
    app.connect("missing-reference", resolve_header_links)
    app.connect("autodoc-process-docstring", raises_nothing, priority=400)  # before napoleon (500)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
