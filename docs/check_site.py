# SPDX-License-Identifier: Apache-2.0
"""Checks of the built site, used by tests/test_docs.py (and runnable by hand:
``python docs/check_site.py build/docs/html``).

Two checks, each returning a list of problems (empty when the site is good):

``check_links(html_dir)``
    Parses every built page with the standard library's HTML parser and
    reports each internal link (``href``/``src``/``data``) whose file does not
    exist or whose ``#fragment`` names no element of the target page, and each
    page resource (script, stylesheet, image, object, iframe) that points off
    the site.  Together with the Sphinx build (``-W -n``: unresolved
    references, Doxygen symbols, ``literalinclude`` markers and ``:repo-file:``
    paths are warnings, hence errors) this is the "nothing dangles" check.

``check_in_browser(html_dir)``
    Serves the site on 127.0.0.1 (an ephemeral port, for the duration of the
    check), opens every page in Debian's headless Chromium through Debian's
    chromium-driver and selenium, with a fresh profile and
    ``--headless --no-sandbox --disable-gpu --disable-background-networking``.
    Host resolution is limited to 127.0.0.1 (``--host-resolver-rules``), so an
    external request fails inside the browser without leaving the machine; it
    is still recorded and reported.  Reports: every console message of level
    SEVERE (console.error, uncaught exceptions, failed loads), every request
    that is not to the local server (or ``data:``/``blob:``/``about:``), every
    request that failed or answered 400 or more, every diagram (``.graphviz``
    image or object) that did not render with a non-zero size, and a site
    search (``search.html?q=...``) that does not finish with a hit.
"""

from __future__ import annotations

import functools
import html
import html.parser
import http.server
import json
import re
import shutil
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
LOCAL_SCHEMES = ("data:", "blob:", "about:", "chrome-error:", "chrome:")
# Attributes that name a resource the page loads (not a link the reader follows).
RESOURCE_ATTRS = {
    ("script", "src"),
    ("link", "href"),
    ("img", "src"),
    ("object", "data"),
    ("iframe", "src"),
    ("embed", "src"),
    ("source", "src"),
    ("video", "src"),
    ("audio", "src"),
}


# ------------------------------------------------------------------ links
class _Page(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.refs: list[tuple[str, str, str]] = []  # (tag, attr, url)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key):
                self.ids.add(a[key])
        for attr, value in a.items():
            # href, src, data; in SVG also xlink:href (any namespace prefix)
            if value is not None and (attr in ("href", "src", "data") or attr.endswith(":href")):
                if not (tag == "link" and a.get("rel") == "canonical"):
                    self.refs.append((tag.split(":")[-1], attr.split(":")[-1], value))


def _parse(path: Path) -> _Page:
    p = _Page()
    p.feed(path.read_text(encoding="utf-8", errors="replace"))
    return p


def html_pages(html_dir: Path) -> list[Path]:
    """Every page of the site.

    Args:
        html_dir (pathlib.Path): the built site (``build/docs/html``).

    Returns:
        list[pathlib.Path]: the ``.html`` files outside ``_static``,
        ``_images`` and ``_sources``, sorted.

    Raises:
        Nothing (a missing directory gives an empty list).
    """
    return sorted(
        p
        for p in Path(html_dir).rglob("*.html")
        if not {"_static", "_images", "_sources"} & set(p.relative_to(html_dir).parts)
    )


def check_links(html_dir: Path) -> list[str]:
    """Dangling internal links and off-site resources.

    Args:
        html_dir (pathlib.Path): the built site.

    Returns:
        list[str]: one line per problem, ``PAGE: what``; empty when every
        internal ``href``/``src``/``data`` (pages and diagram SVGs) names an
        existing file and anchor, and no page loads a resource off the site.

    Raises:
        OSError: a page cannot be read.
    """
    html_dir = Path(html_dir).resolve()
    problems: list[str] = []
    parsed: dict[Path, _Page] = {}

    def page(path: Path) -> _Page:
        if path not in parsed:
            parsed[path] = _parse(path)
        return parsed[path]

    # Pages, and the diagrams' SVG files, whose nodes may link to pages.
    for src in html_pages(html_dir) + sorted((html_dir / "_images").glob("*.svg")):
        rel_src = src.relative_to(html_dir)
        for tag, attr, url in page(src).refs:
            parts = urllib.parse.urlsplit(url)
            if (
                url.startswith(LOCAL_SCHEMES)
                or parts.scheme == "mailto"
                or url.startswith("javascript:")
            ):
                continue
            if parts.scheme or url.startswith("//"):
                if (tag, attr) in RESOURCE_ATTRS:
                    problems.append(f"{rel_src}: <{tag} {attr}> loads an off-site resource: {url}")
                continue  # a hyperlink to another site is followed by the reader, not loaded
            target = (
                src if not parts.path else (src.parent / urllib.parse.unquote(parts.path)).resolve()
            )
            if target.is_dir():
                target = target / "index.html"
            if not target.is_relative_to(html_dir):
                problems.append(f"{rel_src}: <{tag} {attr}> points outside the site: {url}")
                continue
            if not target.exists():
                problems.append(f"{rel_src}: <{tag} {attr}> to a missing file: {url}")
                continue
            frag = urllib.parse.unquote(parts.fragment)
            if frag and target.suffix == ".html" and frag not in page(target).ids:
                problems.append(f"{rel_src}: <{tag} {attr}> to a missing anchor: {url}")
    return problems


# ------------------------------------------------------------------ private citations
# "issue" or "issues" followed by a number, or "the issue": this project's own tracker, which
# no reader can open.  A public issue is cited with its tracker's form instead (gh-N, bpo-N,
# cuda-python issue #N), which this pattern does not match.
PRIVATE_ISSUE = re.compile(
    r"(?i)(?<![#\w-])issues? \d+\b(?! *[#\d])"
    r"|\bthe issue\b(?!s| *#| +cuda-python)"
)


def private_citations(text: str) -> list[str]:
    """Mentions of this project's own issue numbers in a text.

    Args:
        text (str): page text (tags stripped) or a source file.

    Returns:
        list[str]: each mention with a little context; empty when none.

    Raises:
        Nothing.
    """
    return [
        " ".join(text[max(0, m.start() - 30) : m.end() + 15].split())
        for m in PRIVATE_ISSUE.finditer(text)
    ]


def check_private_citations(html_dir: Path) -> list[str]:
    """Pages that cite this project's own issue numbers.

    Args:
        html_dir (pathlib.Path): the built site.

    Returns:
        list[str]: ``PAGE: "...issue N..."`` per mention, in the text of every
        page, the copies of repository files under ``_repo/`` (rendered
        sources: test files, notes, headers) included.

    Raises:
        OSError: a page cannot be read.
    """
    html_dir = Path(html_dir)
    out = []
    for page in html_pages(html_dir):
        rel = page.relative_to(html_dir).as_posix()
        text = html.unescape(
            re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8", errors="replace"))
        )
        out += [f'{rel}: "{m}"' for m in private_citations(text)]
    return out


# ------------------------------------------------------------------ browser
class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the browser check reports what matters
        pass


def serve(html_dir: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Serve a directory over HTTP on the loopback interface.

    Args:
        html_dir (pathlib.Path): the directory to serve.

    Returns:
        tuple: the running ``ThreadingHTTPServer`` (call ``shutdown()`` and
        ``server_close()`` when done) and its base URL (str,
        ``http://127.0.0.1:PORT/``, an ephemeral port).

    Raises:
        OSError: no port could be bound.
    """
    handler = functools.partial(_QuietHandler, directory=str(html_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, name="docs-http", daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


DIAGRAM_JS = r"""
const out = [];
const sel = 'img.graphviz, object.graphviz, div.graphviz > img, div.graphviz > object';
for (const el of document.querySelectorAll(sel)) {
  const r = el.getBoundingClientRect();
  let ok = r.width > 0 && r.height > 0, why = `box ${r.width}x${r.height}`;
  if (el.tagName === 'IMG') {
    ok = ok && el.complete && el.naturalWidth > 0 && el.naturalHeight > 0;
    why += ` natural ${el.naturalWidth}x${el.naturalHeight} complete=${el.complete}`;
  } else {
    const doc = el.contentDocument, svg = doc && doc.documentElement;
    let bw = 0, bh = 0;
    if (svg && svg.localName === 'svg' && svg.getBBox) {
      const b = svg.getBBox(); bw = b.width; bh = b.height;
    }
    ok = ok && bw > 0 && bh > 0;
    why += ` svg bbox ${bw}x${bh}`;
  }
  out.push({src: el.getAttribute('src') || el.getAttribute('data'), ok: ok, why: why});
}
return out;
"""


SEARCH_JS = r"""
const s = document.querySelector('#search-results');
const summary = s && s.querySelector('.search-summary');
const done = summary && /finished|did not match/i.test(summary.textContent);
return done ? [summary.textContent, s.querySelectorAll('li').length] : null;
"""


LAYOUT_WIDTH_PX = 1400
MIN_DIAGRAM_FONT_PX = 11.0
# Code blocks must fit their column on every page but the copies of
# repository files (``_repo/``: a whole file with line-number anchors, which
# scrolls in its own box like a file viewer).
CODE_SCROLL_PREFIXES = ("_repo/",)
CPP_API_PAGES = ("api/cpp.html",)
PY_API_PAGES = ("api/python.html",)

LAYOUT_JS = r"""
const [codeFit, cppApi, minFont, pyApi] = arguments;
const out = [];
const main = document.querySelector('article[role=main]') || document.querySelector('article')
  || document.body;
const mainBox = main.getBoundingClientRect();
const snip = (t) => t.replace(/\s+/g, ' ').trim().slice(0, 70);
// 1. code blocks that scroll sideways (every page but the _repo/ file copies)
if (codeFit) {
  for (const pre of main.querySelectorAll('pre')) {
    if (pre.scrollWidth > pre.clientWidth + 1) {
      const longest = pre.textContent.split('\n')
        .reduce((a, b) => (b.length > a.length ? b : a), '');
      out.push(`code block overflows its column (${pre.scrollWidth} > ${pre.clientWidth} px): `
               + snip(longest));
    }
  }
}
// 2. citations that are not links
const cite = /\b(?:[Gg][Hh]|bpo)-\d+|\bPR #\d+|cuda-python issue #\d+/g;
const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
for (let n = walker.nextNode(); n; n = walker.nextNode()) {
  const p = n.parentElement;
  if (!p || p.closest('a, script, style, .headerlink')) continue;
  for (const m of n.textContent.matchAll(cite)) {
    out.push(`citation is not a link: ${m[0]} in "${snip(n.textContent)}"`);
  }
}
// 3. tables: fit the container, or (the version table) scroll in their box with a
// frozen first column
for (const t of main.querySelectorAll('table')) {
  let scroller = null;
  for (let a = t.parentElement; a && a !== main.parentElement; a = a.parentElement) {
    const ox = getComputedStyle(a).overflowX;
    if (ox === 'auto' || ox === 'scroll') { scroller = a; break; }
  }
  const box = scroller || t.parentElement;
  const tw = t.getBoundingClientRect().width;
  const name = t.classList.contains('probe-matrix') ? 'version table' :
               (t.classList.contains('contract') ? 'contract table' :
                `table "${snip(t.rows[0] ? Array.from(t.rows[0].cells)
                  .map(c => c.textContent.trim()).join(' ') : '')}"`);
  const boxRect = box.getBoundingClientRect();
  if (boxRect.right > mainBox.right + 1 || boxRect.left < mainBox.left - 1) {
    out.push(`${name}: its box (${Math.round(boxRect.width)} px) is wider than the page column `
             + `(${Math.round(mainBox.width)} px)`);
  }
  if (tw <= box.clientWidth + 1) continue;
  if (t.classList.contains('probe-matrix') && scroller) {
    const loose = Array.from(t.rows)
      .filter(r => r.cells[0] && getComputedStyle(r.cells[0]).position !== 'sticky');
    if (loose.length) {
      out.push(`${name} scrolls (${Math.round(tw)} > ${box.clientWidth} px) but its first `
               + `column is not frozen in ${loose.length} row(s)`);
    }
    continue;
  }
  out.push(`${name} is wider than its container (${Math.round(tw)} > ${box.clientWidth} px)`);
}
// 4. contract rows: an id and a permalink each; identifiers not broken between letters
for (const t of main.querySelectorAll('table.contract')) {
  for (const r of t.querySelectorAll('tbody > tr')) {
    const first = snip(r.cells[0] ? r.cells[0].textContent : '');
    if (!r.id) { out.push(`contract row without an anchor: ${first}`); continue; }
    if (!r.querySelector(`a[href="#${CSS.escape(r.id)}"]`)) {
      out.push(`contract row #${r.id} has no permalink`);
    }
  }
  for (const code of t.querySelectorAll('code')) {
    const w = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    let prev = null, broken = false;  // prev: [char, top]
    for (let n = w.nextNode(); n && !broken; n = w.nextNode()) {
      for (let i = 0; i < n.length && !broken; i++) {
        const rg = document.createRange(); rg.setStart(n, i); rg.setEnd(n, i + 1);
        const rects = rg.getClientRects(); if (!rects.length) continue;
        const ch = n.textContent[i], top = rects[0].top;
        if (prev && top > prev[1] + 2 && /[A-Za-z0-9]/.test(prev[0]) && /[A-Za-z0-9]/.test(ch)) {
          out.push('contract table breaks an identifier between letters: '
                   + snip(code.textContent));
          broken = true;
        }
        prev = [ch, top];
      }
    }
  }
}
// 5. C++ API: one labelled line each for Thread, Memory ordering, Errors, Source
if (cppApi) {
  const want = ['Thread', 'Memory ordering', 'Errors', 'Source'];
  const label = /(?:^|[.;)]\s+)(Thread|Memory ordering|Errors|Source):\s/;
  for (const p of main.querySelectorAll('p')) {
    if (!p.closest('dl.field-list') && label.test(p.textContent)) {
      out.push(`C++ API: labels run together in a paragraph: ${snip(p.textContent)}`);
    }
  }
  for (const dl of main.querySelectorAll('dl.cpp')) {
    if (dl.parentElement.closest('dl.cpp')) continue;  // members: their class carries the contract
    const dt = dl.querySelector(':scope > dt');
    const name = snip(dt ? dt.textContent.replace('\u00b6', '') : '?');
    if (/^namespace\b/.test(name)) continue;  // the namespace's overview, not a declaration
    const dd = dl.querySelector(':scope > dd');
    const labels = [];
    for (const f of (dd ? dd.querySelectorAll('dl.field-list.dc-contract') : [])) {
      if (f.parentElement.closest('dl.cpp') !== dl) continue;
      for (const d of f.querySelectorAll(':scope > dt')) {
        labels.push(d.textContent.replace(/[:\s]+$/, '').trim());
      }
    }
    const bad = want.filter(w => labels.filter(l => l === w).length !== 1);
    if (bad.length) {
      out.push(`C++ API: ${name}: not exactly one labelled line for ${bad.join(', ')} `
               + `(found: ${labels.join(', ') || 'none'})`);
    }
  }
}
// 6. Python API: each signature once, in public types
if (pyApi) {
  for (const dl of main.querySelectorAll('dl.py')) {
    const dt = dl.querySelector(':scope > dt');
    if (!dt) continue;
    const sig = snip(dt.textContent.replace('\u00b6', ''));
    if (/\b_native\./.test(sig)) out.push(`Python API: a private type in the signature: ${sig}`);
    const name = (dt.querySelector('.sig-name') || dt).textContent.trim();
    const dd = dl.querySelector(':scope > dd');
    const first = dd && dd.querySelector(':scope > p');
    if (first && name && first.textContent.trim().startsWith(name + '(')) {
      out.push(`Python API: the signature is shown twice: ${snip(first.textContent)}`);
    }
  }
}
// 7. diagrams: the smallest text as rendered
for (const el of main.querySelectorAll('object.graphviz')) {
  const svg = el.contentDocument && el.contentDocument.documentElement;
  if (!svg || !svg.viewBox || !svg.viewBox.baseVal || !svg.viewBox.baseVal.width) continue;
  const scale = el.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  let min = Infinity, which = '';
  for (const t of svg.querySelectorAll('text')) {
    const fs = parseFloat(t.getAttribute('font-size') || getComputedStyle(t).fontSize);
    if (fs * scale < min) { min = fs * scale; which = t.textContent; }
  }
  if (min < minFont) {
    out.push(`diagram ${el.getAttribute('data')}: text renders at ${min.toFixed(1)} px `
             + `(< ${minFont}): "${snip(which)}"`);
  }
}
return out;
"""


def _wait_search(driver, timeout_s: float = 15.0) -> list | None:
    """Wait for Sphinx's client-side search to finish; its summary and hit count."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        result = driver.execute_script(SEARCH_JS)
        if result:
            return result
        time.sleep(0.1)
    return None


def _wait_loaded(driver, timeout_s: float = 20.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        state = driver.execute_script(
            "return [document.readyState, Array.from(document.querySelectorAll('img'))"
            ".every(i => i.complete), Array.from(document.querySelectorAll('object'))"
            ".every(o => o.contentDocument && o.contentDocument.readyState === 'complete')]"
        )
        if state[0] == "complete" and state[1] and state[2]:
            return
        time.sleep(0.05)


def check_in_browser(
    html_dir: Path,
    pages: list[Path] | None = None,
    timeout_s: float = 30.0,
    search_query: str | None = "pending call",
) -> tuple[list[str], dict]:
    """Open every page in headless Chromium and report what went wrong.

    Args:
        html_dir (pathlib.Path): the built site.
        pages (list[pathlib.Path] | None): pages to open; default every page
            (:func:`html_pages`).
        timeout_s (float): page-load timeout per page, in seconds.
        search_query (str | None): also run the site's search for this text
            (``search.html?q=...``) and require it to finish with at least one
            hit; None skips that.

    Returns:
        tuple: ``problems`` (list[str], one line per console error, external
        request, failed request, unrendered diagram or layout fault (see the
        module docstring); empty when clean) and
        ``stats`` (dict: ``pages`` opened (int), ``requests`` seen (int),
        ``diagrams`` (dict, page -> number of diagrams found), and
        ``search_hits`` (int) when a search ran).

    Raises:
        FileNotFoundError: chromium or chromedriver is not installed.
        selenium.common.exceptions.WebDriverException: the browser could not
            be started or a page did not load within ``timeout_s``.
    """
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    html_dir = Path(html_dir).resolve()
    pages = pages if pages is not None else html_pages(html_dir)
    for exe in (CHROMIUM, CHROMEDRIVER):
        if not Path(exe).exists():
            raise FileNotFoundError(
                f"{exe} is missing: `make docs` (tools/docs.sh) installs chromium and "
                "chromium-driver with apt-get"
            )
    server, base = serve(html_dir)
    profile = tempfile.mkdtemp(prefix="dc-docs-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        f"--user-data-dir={profile}",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--disable-extensions",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        f"--window-size={LAYOUT_WIDTH_PX},900",
        # Resolve nothing but the local server: an external request fails here, offline.
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    problems: list[str] = []
    stats: dict = {"pages": 0, "requests": 0, "diagrams": {}}
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    try:
        driver.set_page_load_timeout(timeout_s)
        driver.get("about:blank")
        driver.get_log("browser")
        driver.get_log("performance")
        visits = [(p.relative_to(html_dir).as_posix(), "") for p in pages]
        if search_query and (html_dir / "search.html").exists():
            visits.append(("search.html", "?q=" + urllib.parse.quote_plus(search_query)))
        for rel_path, query in visits:
            rel = rel_path + query
            driver.get(base + rel)
            _wait_loaded(driver)
            if query:
                found = _wait_search(driver)
                if found is None:
                    problems.append(f"{rel}: the search did not finish")
                elif found[1] == 0:
                    problems.append(f"{rel}: the search found nothing ({found[0].strip()})")
                stats["search_hits"] = found[1] if found else 0
            else:
                stats["pages"] += 1
            for entry in driver.get_log("browser"):
                if entry.get("level") == "SEVERE":
                    problems.append(f"{rel}: console error: {entry.get('message')}")
            requests: dict[str, str] = {}
            for entry in driver.get_log("performance"):
                msg = json.loads(entry["message"])["message"]
                method, params = msg.get("method"), msg.get("params", {})
                if method == "Network.requestWillBeSent":
                    req_url = params["request"]["url"]
                    requests[params["requestId"]] = req_url
                    stats["requests"] += 1
                    if not (req_url.startswith(base) or req_url.startswith(LOCAL_SCHEMES)):
                        problems.append(f"{rel}: external request: {req_url}")
                elif method == "Network.loadingFailed" and not params.get("canceled"):
                    problems.append(
                        f"{rel}: failed request: {requests.get(params['requestId'], '?')} "
                        f"({params.get('errorText')})"
                    )
                elif method == "Network.responseReceived":
                    status = params["response"].get("status", 0)
                    if status >= 400:
                        problems.append(
                            f"{rel}: request answered {status}: {params['response'].get('url')}"
                        )
            if not query:
                for problem in driver.execute_script(
                    LAYOUT_JS,
                    not rel_path.startswith(CODE_SCROLL_PREFIXES),
                    rel_path in CPP_API_PAGES,
                    MIN_DIAGRAM_FONT_PX,
                    rel_path in PY_API_PAGES,
                ):
                    problems.append(f"{rel}: {problem}")
            diagrams = driver.execute_script(DIAGRAM_JS)
            stats["diagrams"][rel] = len(diagrams)
            for d in diagrams:
                if not d["ok"]:
                    problems.append(f"{rel}: diagram did not render: {d['src']} ({d['why']})")
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()
        shutil.rmtree(profile, ignore_errors=True)
    return problems, stats


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python docs/check_site.py HTML_DIR [--no-browser]``.

    Args:
        argv (list[str] | None): arguments; default ``sys.argv[1:]``.

    Returns:
        int: 0 when no problem was found, 1 otherwise.

    Raises:
        SystemExit: bad arguments (argparse).
    """
    import argparse

    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("html_dir", type=Path)
    ap.add_argument("--no-browser", action="store_true", help="only the link check")
    a = ap.parse_args(argv)
    problems = check_links(a.html_dir)
    if not a.no_browser:
        more, stats = check_in_browser(a.html_dir)
        problems += more
        print(
            f"browser: {stats['pages']} pages, {stats['requests']} requests, "
            f"{sum(stats['diagrams'].values())} diagrams"
        )
    for p in problems:
        print(p)
    print(f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
