# SPDX-License-Identifier: Apache-2.0
"""The docs site: it builds with no warning, every page loads cleanly in a
headless browser, nothing dangles, and each check can fail.

Marker ``docs``: runs once, in the matrix's ``docs`` environment (Python 3.12
with docs/requirements.txt), through ``make test``; by hand:
``python3 tools/matrix.py run docs -- bash -c '$PY -m pytest -m docs tests/test_docs.py'``.

The site is built by ``tools/docs.sh`` (what ``make docs`` runs), once per
session; it runs the probe first when ``build/probe/probe.json`` is missing or
stale.  The browser check uses Debian's chromium and chromium-driver, which
``tools/docs.sh`` installs.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import hang_guard

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
HTML = REPO / "build" / "docs" / "html"
WARNINGS = REPO / "build" / "docs" / "warnings.log"
HEADERS = REPO / "include" / "deferred_cleanup"
COMPONENTS = ["item", "host", "queue", "callback", "scheduling", "rearm", "drain", "shutdown"]
# Headers explained on another header's page (the re-arm rule's state beside the rule).
HEADER_PAGE = {**{c: c for c in COMPONENTS}, "rearm_state": "rearm"}
# the probe on every interpreter may run first; a hang guard (conftest.hang_guard)
BUILD_TIMEOUT_S = hang_guard(1500)

sys.path[:0] = [str(DOCS), str(DOCS / "_ext")]  # check_site, dc_probe_table
pytestmark = [pytest.mark.docs, pytest.mark.timeout(BUILD_TIMEOUT_S + 300)]


@pytest.fixture(scope="module")
def site() -> Path:
    """Build the site with tools/docs.sh (make docs); fail with its output."""
    try:
        p = subprocess.run(
            ["bash", str(REPO / "tools" / "docs.sh")],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"tools/docs.sh did not finish in {BUILD_TIMEOUT_S} s:\n{exc.stdout}\n{exc.stderr}"
        )
    if p.returncode != 0:
        pytest.fail(f"make docs failed ({p.returncode}):\n{p.stdout[-6000:]}\n{p.stderr[-6000:]}")
    assert (HTML / "index.html").exists()
    return HTML


def _text(page: Path) -> str:
    """A built page's text, tags stripped and entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


# ------------------------------------------------------------------ the real site
def test_build_has_no_warning(site):
    warnings = WARNINGS.read_text() if WARNINGS.exists() else ""
    assert warnings.strip() == "", f"Sphinx/Doxygen warnings:\n{warnings}"


def test_every_page_loads_cleanly_in_chromium(site):
    from check_site import check_in_browser, html_pages

    problems, stats = check_in_browser(site, search_query="pending call")
    assert problems == []
    assert stats["search_hits"] > 0
    assert stats["pages"] == len(html_pages(site)) >= 15
    assert stats["diagrams"].get("overview.html", 0) >= 1, (
        "the overview's sequence diagram is missing"
    )


def test_no_dangling_link_or_offsite_resource(site):
    from check_site import check_links

    assert check_links(site) == []


def test_no_page_or_header_cites_a_private_issue_number(site):
    """Readers cannot open this project's own issues: the pages (with the
    rendered copies of test files and notes), the headers and every note
    cite public sources (gh-N, bpo-N, cuda-python PR #N, a CPython
    file and tag) or the page that carries the rationale."""
    from check_site import check_private_citations, private_citations

    found = check_private_citations(site)  # every page, the rendered sources under _repo/ included
    sources = sorted(HEADERS.glob("*.hpp")) + sorted(
        p
        for p in (REPO / "notes").rglob("*")
        if p.is_file() and p.suffix in (".md", ".txt", ".json")
    )
    for source in sources:
        found += [
            f'{source.relative_to(REPO)}: "{m}"' for m in private_citations(source.read_text())
        ]
    assert found == [], "\n".join(found)


def test_private_citation_check_can_fail():
    from check_site import private_citations

    # Spelled in pieces: this file is rendered on the site, whose check must
    # not find these examples in it.
    i = "issue"
    text = (
        f"Source: {i} 3 Part 1.7. See {i}s 2 and 3. As recorded in the {i}. Public: "
        f"gh-95820, bpo-30703, cuda-python {i} #2042, cuda-python PR #2371, GH-104812, "
        f"the {i} #2042, the {i}s they list."
    )
    found = private_citations(text)
    assert len(found) == 3, found
    assert f"{i} 3 Part" in found[0] and f"{i}s 2 and" in found[1] and f"in the {i}" in found[2], (
        found
    )


@pytest.mark.parametrize("component", COMPONENTS)
def test_component_page_quotes_its_own_header(site, component):
    header = HEADERS / f"{component}.hpp"
    source = (DOCS / "design" / f"{component}.rst").read_text()
    quoted = re.findall(r"literalinclude::\s*(\S+)", source)
    assert f"../../include/deferred_cleanup/{component}.hpp" in quoted
    # The quote in the built page is the header's text, not a copy: every
    # marked region the page names appears verbatim (modulo indentation).
    text = _text(site / "design" / f"{component}.html")
    regions = re.findall(r":start-after: // \[doc:([\w-]+)\]", source)
    assert regions, f"design/{component}.rst quotes no marked region of {header.name}"
    # Regions may come from any header the page quotes (rearm.rst: two).
    src = "".join((HEADERS / Path(q).name).read_text() for q in quoted if q.endswith(".hpp"))
    for name in regions:
        body = src.split(f"// [doc:{name}]", 1)[1].split(f"// [end-doc:{name}]", 1)[0]
        for line in (ln.strip() for ln in body.splitlines()):
            if line:
                assert line in text, (
                    f"{header.name} [doc:{name}]: {line!r} not on design/{component}.html"
                )


def test_every_marker_region_of_every_header_is_quoted(site):
    """Each // [doc:NAME] region of a component header appears on its page."""
    for component, page_name in HEADER_PAGE.items():
        src = (HEADERS / f"{component}.hpp").read_text()
        page = (DOCS / "design" / f"{page_name}.rst").read_text()
        for name in re.findall(r"// \[doc:([\w-]+)\]", src):
            assert f"// [doc:{name}]" in page, (
                f"{component}.hpp region {name} is not quoted on its page"
            )


def test_version_page_shows_every_interpreter(site):
    """One column per interpreter of build/probe/probe.json, covering every
    CPython minor version 3.10 to 3.15, and the expected table's citations as
    footnotes."""
    page = (site / "versions.html").read_text(encoding="utf-8")
    table = re.search(r"<table[^>]*probe-matrix.*?</table>", page, re.S)
    assert table, "versions.html has no probe table"
    header = html.unescape(
        re.sub(r"<[^>]+>", " ", re.search(r"<thead>.*?</thead>", table[0], re.S)[0])
    )
    from dc_probe_table import REQUIRED_MINORS

    for minor in REQUIRED_MINORS:
        assert re.search(rf"\b{re.escape(minor)}\.\d+", header), (
            f"no column for CPython {minor}: {header}"
        )
    from deferred_cleanup import cpython_facts

    def plain(t: str) -> str:  # undo Sphinx's smart quotes and dashes; collapse whitespace
        t = t.translate(str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'}))
        return re.sub(r"\s+", " ", t.replace("\u2014", "---").replace("\u2013", "--"))

    text = plain(_text(site / "versions.html"))
    for row in cpython_facts.TABLE:
        assert plain(row.cite)[:60] in text, (
            f"citation of {row.field} missing from the version page"
        )


def _fake_result(name: str, version: str, **fields) -> dict:
    from deferred_cleanup import cpython_facts

    major, minor = (int(x) for x in version.split(".")[:2])
    measured = {f: cpython_facts.expected(f, (major, minor)) for f in cpython_facts.FIELDS}
    measured.update(fields)
    return {
        "interpreter": {
            "name": name,
            "version": version,
            "version_info": [major, minor, 0],
            "debug": False,
        },
        "fields": measured,
    }


def test_probe_table_flags_a_difference_and_missing_versions():
    """The version table's generator can fail: a measured value that differs
    from the expected table is shown in bold with the expectation, and a
    missing CPython version is reported (a warning, so the docs build fails)."""
    from dc_probe_table import render
    from deferred_cleanup import cpython_facts

    data = {
        "interpreters": [_fake_result("a", "3.12.1", capacity=7), _fake_result("b", "3.13.0")],
        "missing": [{"name": "cp315-sid", "why": "not installed"}],
    }
    rst, problems = render(data, cpython_facts)
    assert "**``7``** (expected ``31``)" in rst
    assert "1 measurement(s) differ" in rst
    assert "cp315-sid: not installed" in rst
    assert sorted(problems) == sorted(
        f"no probe result for CPython {m}" for m in ("3.10", "3.11", "3.14", "3.15")
    )
    clean, none = render(
        {"interpreters": [_fake_result(f"i{m}", f"3.{m}.0") for m in range(10, 16)]}, cpython_facts
    )
    assert none == [] and "every measurement matches" in clean


def test_free_threaded_line_is_derived_from_the_interpreters_measured():
    """The version page's free-threaded sentence comes from each measured
    interpreter's ``gil_disabled``, not from a fixed text."""
    from dc_probe_table import render
    from deferred_cleanup import cpython_facts

    a, b = _fake_result("cp313-x", "3.13.0"), _fake_result("cp313t-x", "3.13.0")
    a["interpreter"]["gil_disabled"], b["interpreter"]["gil_disabled"] = False, True
    some, _ = render({"interpreters": [a, b], "free_threaded": "not available"}, cpython_facts)
    assert (
        "measured on ``cp313t-x`` (1 of the 2 interpreters)" in some and "not available" not in some
    )
    none, _ = render({"interpreters": [a], "free_threaded": "not available"}, cpython_facts)
    assert "none of the 1 interpreters measured is one" in none and "not available" not in none


# ------------------------------------------------------------------ the checks can fail
def test_stale_data_gets_a_notice_and_current_data_none(tmp_path, monkeypatch):
    """A data file whose measured sources changed since its stamp gets the
    warning "Measured at <commit>; since then <files> changed"; an unchanged
    one gets only its provenance line; an unstamped one is a build warning."""
    from docutils import nodes

    import dc_evidence
    import provenance  # tools/provenance.py (dc_evidence put tools/ on the path)

    monkeypatch.setattr(dc_evidence, "REPO", tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.hpp").write_text("int a;\n")
    (tmp_path / "src" / "b.hpp").write_text("int b;\n")
    (tmp_path / "notes").mkdir()
    for name in ("old.json", "new.json"):
        (tmp_path / "notes" / name).write_text('{"x": 1}\n')
        provenance.write_stamp(
            tmp_path / "notes" / name, provenance.stamp(["src/*.hpp"], repo=tmp_path)
        )
    (tmp_path / "notes" / "old.txt").write_text("listing\n")
    provenance.write_stamp(
        tmp_path / "notes" / "old.txt", provenance.stamp(["src/a.hpp"], repo=tmp_path)
    )
    assert (tmp_path / "notes" / "old.txt").read_text().startswith(provenance.TEXT_PREFIX)
    assert provenance.read_stamp(tmp_path / "notes" / "old.txt")["globs"] == ["src/a.hpp"]

    def stale(out):
        return [n.astext() for n in out if "dc-stale" in n.get("classes", [])]

    assert stale(dc_evidence.notice_nodes(["notes/new.json", "notes/old.txt"])) == []
    (tmp_path / "src" / "a.hpp").write_text("int a = 1;\n")
    (tmp_path / "src" / "c.hpp").write_text("int c;\n")
    out = dc_evidence.notice_nodes(["notes/new.json", "notes/old.txt"])
    texts = stale(out)
    assert len(texts) == 2 and all("Measured at" in t and "src/a.hpp" in t for t in texts), texts
    assert "src/c.hpp" in texts[0] and "src/c.hpp" not in texts[1], texts
    assert any(isinstance(n, nodes.container) and "dc-provenance" in n["classes"] for n in out)


def test_regenerated_data_is_preferred_when_current(tmp_path, monkeypatch):
    """The lost-wakeup page renders build/evidence/ when that copy is current,
    the committed copy under notes/ otherwise."""
    import dc_evidence
    import provenance

    monkeypatch.setattr(dc_evidence, "REPO", tmp_path)
    (tmp_path / "a.hpp").write_text("int a;\n")
    committed = "notes/lost-wakeup/lost-wakeup.json"
    regen = dc_evidence.REGENERATED[committed]
    for rel in (committed, regen):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}\n")
    assert dc_evidence.resolve(committed) == regen  # neither is stamped: the fresher copy
    provenance.write_stamp(tmp_path / committed, provenance.stamp(["a.hpp"], repo=tmp_path))
    assert dc_evidence.resolve(committed) == committed  # the copy has no stamp: stale
    provenance.write_stamp(tmp_path / regen, provenance.stamp(["a.hpp"], repo=tmp_path))
    assert dc_evidence.resolve(committed) == regen  # both current: this build's
    (tmp_path / "a.hpp").write_text("int a = 2;\n")
    provenance.write_stamp(tmp_path / committed, provenance.stamp(["a.hpp"], repo=tmp_path))
    assert dc_evidence.resolve(committed) == committed


def test_pages_show_where_their_data_was_measured(site):
    """The lost-wakeup page renders the figures this build re-measured, with no
    stale notice for them; a page whose committed data is older than the
    core (Performance, measured at an older commit) shows the notice."""
    lost = _text(site / "lost-wakeup.html")
    assert "build/evidence/lost-wakeup.json: re-measured by this build" in lost
    page = (site / "lost-wakeup.html").read_text(encoding="utf-8")
    for name in ("lost-wakeup.json", "gate-sb.json", "disasm-ours.txt", "disasm-gate-sb.txt"):
        for notice in re.findall(r'<div class="[^"]*\bdc-stale\b[^"]*">.*?</div>', page, re.S):
            assert f"build/evidence/{name}" not in notice, notice
    assert "# provenance:" not in lost
    import provenance

    bench = provenance.read_stamp(REPO / "docs" / "_data" / "bench.json")
    if provenance.changed(bench):
        assert "Measured on older code" in _text(site / "performance.html")


BAD_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>bad</title>
<link rel="icon" href="data:,">
<script src="https://cdn.example.com/lib.js"></script></head><body>
<img class="graphviz" src="_images/missing.svg" alt="missing diagram">
<object class="graphviz" type="image/svg+xml" data="_images/empty.svg"></object>
<a href="nowhere.html">dangling</a> <a href="good.html#no-such-anchor">bad anchor</a>
<a href="good.html#here">good anchor</a>
<script>console.error("deliberate console error")</script>
</body></html>"""
GOOD_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>good</title>
<link rel="icon" href="data:,"></head><body>
<h1 id="here">fine</h1><object class="graphviz" type="image/svg+xml" data="_images/ok.svg"></object>
</body></html>"""
LINKED_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="60" '
    'height="20"><a xlink:href="../from-svg-nowhere.html"><text y="15">x</text></a></svg>'
)
EMPTY_SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="0" height="0"></svg>'
OK_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="120" height="40">'
    '<rect x="2" y="2" width="100" height="30" fill="#ccc"/></svg>'
)


@pytest.fixture
def bad_site(site, tmp_path) -> Path:
    """A two-page site with one of each browser-visible fault.  Depends on
    ``site`` only so that tools/docs.sh has installed chromium first."""
    (tmp_path / "_images").mkdir()
    (tmp_path / "bad.html").write_text(BAD_PAGE)
    (tmp_path / "good.html").write_text(GOOD_PAGE)
    (tmp_path / "_images" / "empty.svg").write_text(EMPTY_SVG)
    (tmp_path / "_images" / "ok.svg").write_text(OK_SVG)
    (tmp_path / "_images" / "linked.svg").write_text(LINKED_SVG)
    return tmp_path


def test_browser_check_catches_a_broken_page(bad_site):
    from check_site import check_in_browser

    problems, stats = check_in_browser(bad_site, search_query=None)
    bad = [p for p in problems if p.startswith("bad.html")]
    assert not [p for p in problems if p.startswith("good.html")], problems
    assert stats["pages"] == 2 and stats["diagrams"]["good.html"] == 1
    assert any("external request: https://cdn.example.com/lib.js" in p for p in bad), bad
    assert any("console error" in p and "deliberate console error" in p for p in bad), bad
    assert any("answered 404" in p and "missing.svg" in p for p in bad), bad
    assert any("diagram did not render: _images/missing.svg" in p for p in bad), bad
    assert any("diagram did not render: _images/empty.svg" in p for p in bad), bad


def test_browser_check_catches_a_search_without_hits(site):
    from check_site import check_in_browser

    problems, _ = check_in_browser(site, pages=[], search_query="zzqx-no-such-word")
    assert len(problems) == 1 and "the search found nothing" in problems[0], problems


def test_link_check_catches_dangling_links(bad_site):
    from check_site import check_links

    problems = check_links(bad_site)
    assert any("missing file: nowhere.html" in p for p in problems), problems
    assert any("missing anchor: good.html#no-such-anchor" in p for p in problems), problems
    assert any("off-site resource: https://cdn.example.com/lib.js" in p for p in problems), problems
    assert any("missing file: _images/missing.svg" in p for p in problems), problems
    assert any(
        "_images/linked.svg" in p and "missing file: ../from-svg-nowhere.html" in p
        for p in problems
    ), problems
    assert not any("good.html#here" in p for p in problems), problems


BAD_HEADER = """\
#pragma once
/// @file
/// A header with one undocumented declaration.
namespace deferred_cleanup {
/// Documented.
inline int documented() noexcept { return 1; }
int undocumented_declaration(int x);
}  // namespace deferred_cleanup
"""


def test_sphinx_build_fails_on_every_unresolved_thing(tmp_path):
    """A small project with one of each: a literalinclude marker, a Doxygen
    symbol, a C++ reference, a document link and a :repo-file: path that do
    not resolve, a component page that does not quote its header, and a
    header that Doxygen warns about.  The build must fail and name each."""
    headers = tmp_path / "headers"
    headers.mkdir()
    (headers / "bad.hpp").write_text(BAD_HEADER)
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(DOCS / "_ext")!r})
        extensions = ["breathe", "dc_docs"]
        nitpicky = True
        dc_doxygen_input = [{str(headers)!r}, {str(DOCS / "namespace.dox")!r}]
        dc_doxygen_output = {str(tmp_path / "doxygen")!r}
        breathe_projects = {{"t": {str(tmp_path / "doxygen" / "xml")!r}}}
        breathe_default_project = "t"
    """)
    )
    queue_hpp = os.path.relpath(HEADERS / "queue.hpp", src)
    (src / "index.rst").write_text(
        textwrap.dedent(f"""
        Broken
        ======

        .. component-quotes:: item

        .. literalinclude:: {queue_hpp}
           :start-after: // [doc:no-such-marker]
           :end-before: // [end-doc:no-such-marker]

        .. doxygenfunction:: deferred_cleanup::no_such_function

        See :cpp:func:`deferred_cleanup::no_such_either`, :doc:`no-such-page` and
        :repo-file:`tests/no/such/file.py`.
    """)
    )
    log = tmp_path / "warnings.log"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-b",
            "html",
            "-W",
            "--keep-going",
            "-n",
            "-E",
            "-q",
            "-w",
            str(log),
            str(src),
            str(tmp_path / "html"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = log.read_text() if log.exists() else p.stderr
    assert p.returncode != 0, out
    expected = {
        "literalinclude marker": r"no-such-marker",
        "Doxygen symbol": r"no_such_function",
        "C++ reference": r"no_such_either",
        "document link": r"no-such-page",
        "repo-file path": r"tests/no/such/file\.py does not exist",
        "component page without its header": r"does not quote its own header .*item\.hpp",
        "Doxygen warning": r"Doxygen: .*undocumented_declaration",
    }
    missing = [what for what, pattern in expected.items() if not re.search(pattern, out)]
    assert missing == [], f"not reported: {missing}\n{out}"


# ------------------------------------------------------------------ the layout checks can fail
def _page(body: str, title: str = "t") -> str:
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>'
        f'<link rel="icon" href="data:,"></head><body><article role="main" style="width:736px">'
        f"{body}</article></body></html>"
    )


WIDE_CELL = '<td style="min-width:1200px">wide</td>'
TINY_TEXT_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="6000pt" height="100pt" viewBox="0 0 6000 100">'
    '<text x="10" y="50" font-size="14.00">tiny label</text></svg>'
)
LEGIBLE_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="700pt" height="100pt" viewBox="0 0 700 100">'
    '<text x="10" y="50" font-size="14.00">legible label</text></svg>'
)
LAYOUT_BAD = {
    # a design page whose quoted code does not fit the column
    "design/bad.html": _page(
        '<div class="highlight-cpp"><div class="highlight"><pre>' + "x" * 300 + "</pre></div></div>"
    ),
    # any other page too: every page but the _repo/ file copies
    "measured.html": _page(
        '<div class="highlight-none"><div class="highlight"><pre>'
        + "y" * 300
        + "</pre></div></div>"
    ),
    "bad-tables.html": _page(
        "<p>A plain gh-95820, a plain cuda-python PR #2371 and bpo-30703.</p>"
        "<pre>// see gh-104812 in a code block</pre>"
        # a wide table with no scroll box
        f'<table class="docutils"><tr><td>a</td>{WIDE_CELL}</tr></table>'
        # the version table scrolls, but its first column is not frozen
        '<div style="overflow-x:auto"><table class="probe-matrix">'
        f"<tr><td>field</td>{WIDE_CELL}</tr></table></div>"
        # contract rows without anchors, an identifier broken between letters
        '<table class="contract" style="width:120px"><tbody><tr><td style="width:60px">'
        '<code style="word-break:break-all">user_object_destructor_with_a_long_name()</code></td>'
        "<td>x</td></tr></tbody></table>"
    ),
    "api/cpp.html": _page(
        '<dl class="cpp function"><dt>void f()</dt>'
        "<dd><p>Does f. Thread: any. Memory ordering: none.</p>"
        "</dd></dl>"
        '<dl class="cpp function"><dt>void g()</dt><dd><dl class="field-list dc-contract">'
        "<dt>Thread</dt><dd>any</dd><dt>Thread</dt><dd>again</dd><dt>Errors</dt><dd>none</dd></dl></dd></dl>"
        '<object class="graphviz" type="image/svg+xml" data="../_images/tiny.svg" '
        'style="width:700px"></object>'
    ),
}
LAYOUT_BAD["api/python.html"] = _page(
    '<dl class="py method"><dt class="sig"><span class="sig-name">attach</span>(self: '
    "deferred_cleanup._native.Graph, obj: object) -> None</dt><dd><p>attach(obj: object) -> "
    "None</p>"
    "<p>An entry point.</p></dd></dl>"
)
LAYOUT_GOOD = {
    "design/good.html": _page(
        '<div class="highlight-cpp"><div class="highlight"><pre>short line</pre></div></div>'
    ),
    # a copy of a repository file scrolls in its own box, like a file viewer
    "_repo/tools/wide.py.html": _page('<div class="highlight"><pre>' + "z" * 300 + "</pre></div>"),
    "good-tables.html": _page(
        '<p>A linked <a href="https://github.com/python/cpython/issues/95820">gh-95820</a>.</p>'
        '<pre>// see <a href="https://github.com/python/cpython/issues/104812">gh-104812</a></pre>'
        '<table class="docutils"><tr><td>a</td><td>narrow</td></tr></table>'
        '<div style="overflow-x:auto"><table class="probe-matrix"><tr>'
        '<td style="position:sticky;left:0;background:#fff">field</td>'
        f"{WIDE_CELL}</tr></table></div>"
        '<table class="contract"><tbody><tr id="contract-drain-now"><td><code>drain_now()</code> '
        '<a class="headerlink" href="#contract-drain-now">¶</a></td><td>x</td></tr></tbody></table>'
    ),
    "api/cpp.html": _page(
        '<dl class="cpp function"><dt>void f()</dt><dd><p>Does f.</p>'
        '<dl class="field-list dc-contract">'
        "<dt>Thread</dt><dd>any</dd><dt>Memory "
        "ordering</dt><dd>none</dd><dt>Errors</dt><dd>none</dd>"
        "<dt>Source</dt><dd>this project</dd></dl></dd></dl>"
        '<object class="graphviz" type="image/svg+xml" data="../_images/legible.svg" '
        'style="width:700px"></object>'
    ),
    "api/python.html": _page(
        '<dl class="py method"><dt class="sig"><span class="sig-name">attach</span>'
        "(obj: object) -> None</dt>"
        "<dd><p>An entry point.</p></dd></dl>"
    ),
}


def _write_site(root: Path, pages: dict[str, str]) -> Path:
    (root / "_images").mkdir(parents=True)
    (root / "_images" / "tiny.svg").write_text(TINY_TEXT_SVG)
    (root / "_images" / "legible.svg").write_text(LEGIBLE_SVG)
    for rel, text in pages.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_layout_check_catches_each_fault(site, tmp_path):
    """One page per layout fault that the browser check must report; the
    same pages done right report nothing.  Depends on ``site`` only so that
    tools/docs.sh has installed chromium first."""
    from check_site import check_in_browser

    bad, _ = check_in_browser(_write_site(tmp_path / "bad", LAYOUT_BAD), search_query=None)
    expected = {
        "code block overflow on a design page": (
            r"^design/bad\.html: code block overflows its column"
        ),
        "code block overflow on any page": r"^measured\.html: code block overflows its column",
        "plain gh- mention": r"^bad-tables\.html: citation is not a link: gh-95820",
        "plain cuda-python PR mention": r"^bad-tables\.html: citation is not a link: PR #2371",
        "plain bpo- mention": r"^bad-tables\.html: citation is not a link: bpo-30703",
        "plain mention in a code block": r"^bad-tables\.html: citation is not a link: gh-104812",
        "table wider than its container": (
            r"^bad-tables\.html: table \"a wide\" is wider than its container"
        ),
        "version table scrolling without a frozen column": (
            r"^bad-tables\.html: version table scrolls .* not frozen"
        ),
        "contract row without an anchor": r"^bad-tables\.html: contract row without an anchor",
        "identifier broken between letters": (
            r"^bad-tables\.html: contract table breaks an identifier"
        ),
        "labels run together": (
            r"^api/cpp\.html: C\+\+ API: labels run together in a paragraph: Does f\."
        ),
        "declaration without its four lines": (
            r"^api/cpp\.html: C\+\+ API: void f\(\): not exactly one labelled line for Thread, "
            r"Memory ordering, Errors, Source"
        ),
        "a duplicated label and missing ones": (
            r"^api/cpp\.html: C\+\+ API: void g\(\): not exactly one labelled line for Thread, "
            r"Memory ordering, Source"
        ),
        "illegible diagram": (
            r"^api/cpp\.html: diagram \.\./_images/tiny\.svg: text renders at \d+\.\d px"
        ),
        "private type in a Python signature": (
            r"^api/python\.html: Python API: a private type in the signature: attach"
        ),
        "Python signature shown twice": (
            r"^api/python\.html: Python API: the signature is shown twice: attach\(obj"
        ),
    }
    missing = [
        what for what, pattern in expected.items() if not any(re.search(pattern, p) for p in bad)
    ]
    assert missing == [], f"not reported: {missing}\n" + "\n".join(bad)
    good, stats = check_in_browser(_write_site(tmp_path / "good", LAYOUT_GOOD), search_query=None)
    assert good == [] and stats["pages"] == 5, good
