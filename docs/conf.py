"""Sphinx configuration for the deferred-cleanup site.

Built by ``make docs`` (``tools/docs.sh``) in the matrix's ``docs`` environment
(Python 3.12 with ``deferred_cleanup._native`` built in and
``docs/requirements.txt`` installed), with ``-W --keep-going -n``: every
warning, every unresolved reference included, fails the build.

Nothing on a built page is loaded from the network: furo ships its fonts and
scripts, diagrams are SVG files rendered by graphviz at build time, and no
page uses math (MathJax would come from a CDN).  ``tests/test_docs.py`` checks
that in a headless browser.
"""
from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))

project = "deferred-cleanup"
author = "the deferred-cleanup developers"
copyright = "2026, the deferred-cleanup developers"
release = version = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # the package's docstrings use Args:/Returns:/Raises: sections
    "sphinx.ext.graphviz",
    "breathe",
    "myst_parser",
    "dc_docs",
    "dc_bench",  # the Performance page's tables and plots, from docs/_data/bench.json
]

root_doc = "index"
source_suffix = {".rst": "restructuredtext"}
exclude_patterns = ["_build", "_ext", "requirements.txt", "Doxyfile"]
templates_path: list[str] = []
nitpicky = True
highlight_language = "none"
pygments_style = "sphinx"

# ---------------------------------------------------------------- HTML
html_theme = "furo"
html_title = "deferred-cleanup"
html_copy_source = False
html_show_sourcelink = False
html_static_path = ["_static"]
html_css_files = ["dc.css"]
html_favicon = "_static/favicon.svg"  # else the browser asks the server for /favicon.ico
html_theme_options = {
    "navigation_with_keys": True,
}

# ---------------------------------------------------------------- diagrams
graphviz_output_format = "svg"
graphviz_dot_args = ["-Gfontname=DejaVu Sans", "-Nfontname=DejaVu Sans", "-Efontname=DejaVu Sans"]

# ---------------------------------------------------------------- C++ API (Breathe)
breathe_projects = {"deferred_cleanup": str(REPO / "build" / "docs" / "doxygen" / "xml")}
breathe_default_project = "deferred_cleanup"
breathe_default_members = ("members",)
breathe_domain_by_extension = {"hpp": "cpp"}
breathe_show_include = False  # the page groups declarations by header already; the include links point to source pages Breathe does not make
cpp_index_common_prefix = ["deferred_cleanup::"]

# ---------------------------------------------------------------- Python API (autodoc)
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}

# ---------------------------------------------------------------- notes (MyST)
myst_heading_anchors = 3
suppress_warnings: list[str] = []

# The standard library has no inventory here (no intersphinx: the build is
# offline), so references to its C++ and Python names cannot resolve.  Only
# those are ignored; every name of this project must resolve.
nitpick_ignore_regex = [
    ("cpp:identifier", r"(std|std::.*|size_t|uint\d+_t|int\d+_t|uintptr_t)"),
    ("cpp:identifier", r"(std::)?(atomic|memory_order|function|thread|mutex|condition_variable|size_t)(<.*>)?"),
    ("py:class", r"(int|float|str|bytes|bool|object|None|NoneType|type|list|dict|tuple|set|frozenset)"),
    ("py:class", r"(collections\.abc|typing|types|os|pathlib|threading|subprocess)\..*"),
    ("py:class", r"(Callable|Iterable|Iterator|Sequence|Mapping|Any|Path|PathLike)"),
    ("py:exc", r"(ValueError|TypeError|RuntimeError|OSError|KeyError|TimeoutError|AssertionError|SystemExit)"),
    ("py:obj", r"(None|True|False)"),
    ("py:func", r"(sys|os|atexit|threading|time|gc|weakref)\..*"),
    ("py:data", r"(sys|os)\..*"),
    # pybind11's common base of every bound class: not part of this project's API.
    ("py:class", r"pybind11_builtins\.pybind11_object"),
]
