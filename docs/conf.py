# SPDX-License-Identifier: Apache-2.0
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
    "sphinx.ext.extlinks",
    "sphinx.ext.intersphinx",
    "breathe",
    "myst_parser",
    "dc_docs",
    "dc_bench",  # the Performance page's tables and plots, from docs/_data/bench.json
    "dc_pending",  # the Performance page's Py_AddPendingCall cost table (tools/bench_pending.py)
    "dc_model",  # the scheduling page's table of a candidate rule's model runs
    "dc_promises",  # the Verification page's promise ledger, from tests/promises.toml
    "dc_alternatives",  # "When to use what": tables from docs/_data/alternatives.json
]

root_doc = "index"
source_suffix = {".rst": "restructuredtext"}
exclude_patterns = ["_build", "_ext", "_inv", "requirements.txt", "Doxyfile"]
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

# ---------------------------------------------------------------- links
# Citations: :gh:`95820`, :bpo:`30703`, :cpython-pr:`19091`, :cuda-pr:`2371`,
# :cuda-issue:`2042`.  dc_docs also turns every plain-text mention of these
# forms (in pages, Doxygen comments, docstrings, notes and quoted headers)
# into a link with the same patterns.  The bpo pattern is the one CPython's own
# Doc/conf.py uses (bugs.python.org redirects to the migrated GitHub issue).
extlinks = {
    "gh": ("https://github.com/python/cpython/issues/%s", "gh-%s"),
    "bpo": ("https://bugs.python.org/issue?@action=redirect&bpo=%s", "bpo-%s"),
    "cpython-pr": ("https://github.com/python/cpython/pull/%s", "PR #%s"),
    "cuda-pr": ("https://github.com/NVIDIA/cuda-python/pull/%s", "cuda-python PR #%s"),
    "cuda-issue": ("https://github.com/NVIDIA/cuda-python/issues/%s", "cuda-python issue #%s"),
}
extlinks_detect_hardcoded_links = True

# CPython's documentation through intersphinx, offline: the build machine
# reaches no web site, so the inventory cannot be fetched.  docs/_inv/python.txt
# lists the few objects these pages cite (Py_AddPendingCall and friends, atexit,
# os.register_at_fork, ...) with their anchors on docs.python.org/3; conf.py
# writes it as a Sphinx inventory (objects.inv format 2) into the build tree,
# and intersphinx reads that file.  A name cited with a role that is not in
# the list is an unresolved reference, hence a build error.
sys.path.insert(0, str(DOCS / "_inv"))
from make_inventory import write_inventory  # noqa: E402  docs/_inv/make_inventory.py

PYTHON_INV = write_inventory(
    DOCS / "_inv" / "python.txt", REPO / "build" / "docs" / "python-objects.inv"
)
intersphinx_mapping = {"python": ("https://docs.python.org/3.13", str(PYTHON_INV))}
intersphinx_timeout = 1

# :repo-file: mentions link to the file's page inside the site (_repo/PATH.html,
# generated at build time); set a URL pattern with {path} and {line} to link a
# hosted copy of the repository instead.
dc_repo_url = ""

# ---------------------------------------------------------------- diagrams
graphviz_output_format = "svg"
graphviz_dot_args = ["-Gfontname=DejaVu Sans", "-Nfontname=DejaVu Sans", "-Efontname=DejaVu Sans"]

# ---------------------------------------------------------------- C++ API (Breathe)
breathe_projects = {"deferred_cleanup": str(REPO / "build" / "docs" / "doxygen" / "xml")}
breathe_default_project = "deferred_cleanup"
breathe_default_members = ("members",)
breathe_domain_by_extension = {"hpp": "cpp"}
# The page groups declarations by header already; the include links point to
# source pages Breathe does not make.
breathe_show_include = False
cpp_index_common_prefix = ["deferred_cleanup::"]

# ---------------------------------------------------------------- Python API (autodoc)
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}

# ---------------------------------------------------------------- notes (MyST)
myst_heading_anchors = 3
suppress_warnings: list[str] = []

# The C++ standard library has no inventory here, and the Python one only the
# few names of docs/_inv/python.txt (the build is offline), so references to
# other standard names cannot resolve.  Only those are ignored; every name of
# this project, and every CPython name cited with a role, must resolve.
nitpick_ignore_regex = [
    ("cpp:identifier", r"(std|std::.*|size_t|uint\d+_t|int\d+_t|uintptr_t)"),
    (
        "cpp:identifier",
        r"(std::)?(atomic|memory_order|function|thread|mutex|condition_variable|size_t)(<.*>)?",
    ),
    (
        "py:class",
        r"(int|float|str|bytes|bool|object|None|NoneType|type|list|dict|tuple|set|frozenset)",
    ),
    ("py:class", r"(collections\.abc|typing|types|os|pathlib|threading|subprocess)\..*"),
    ("py:class", r"(Callable|Iterable|Iterator|Sequence|Mapping|Any|Path|PathLike)"),
    (
        "py:exc",
        r"(ValueError|TypeError|RuntimeError|OSError|KeyError|TimeoutError|AssertionError|SystemExit)",
    ),
    ("py:obj", r"(None|True|False)"),
    ("py:func", r"(sys|os|atexit|threading|time|gc|weakref)\..*"),
    ("py:data", r"(sys|os)\..*"),
    # pybind11's common base of every bound class: not part of this project's API.
    ("py:class", r"pybind11_builtins\.pybind11_object"),
]
