# SPDX-License-Identifier: Apache-2.0
"""The shape the JSON-table directives share: read a data file that a tool
wrote, noted as a dependency of the page (with the tool, where its code makes
the rows), or fail the build with the directive's name and the file.

Used by ``dc_pending`` (pending-cost-table), ``dc_gpu_compare``
(gpu-compare-table) and ``dc_alternatives`` (alternatives-table); each makes
its rows with its own row function from the dict this returns.
"""

from __future__ import annotations

import json
from pathlib import Path

from sphinx.util.docutils import SphinxDirective

REPO = Path(__file__).resolve().parents[2]


def read_json(directive: SphinxDirective, rel: str, *tools: Path) -> object:
    """The JSON at ``rel``, each of ``rel`` and ``tools`` a dependency of the page.

    :param directive: the directive being run (its ``name`` heads the error;
        its ``env`` records the dependencies)
    :param rel: the data file's path from the repository root (str)
    :param tools: further files the rendering depends on (Path), e.g. the tool
        whose ``table_rows`` makes the rows
    :returns: the parsed JSON (a dict for every file these directives read)
    :raises docutils.utils.SystemMessage: through ``directive.error`` when the
        file cannot be read or is not JSON (the build reports it there)
    """
    path = REPO / rel
    directive.env.note_dependency(str(path))
    for tool in tools:
        directive.env.note_dependency(str(tool))
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise directive.error(f"{directive.name}: cannot read {rel}: {exc}") from exc
