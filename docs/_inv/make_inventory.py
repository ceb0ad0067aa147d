# SPDX-License-Identifier: Apache-2.0
"""Write a Sphinx inventory (``objects.inv``, format 2) from a text list.

CPython's documentation is cited through intersphinx, but the docs build runs
offline, so ``https://docs.python.org/3.13/objects.inv`` cannot be fetched.
``docs/_inv/python.txt`` lists the objects these pages cite; docs/conf.py calls
:func:`write_inventory` on it at every build.  The format is Sphinx's own:
four header lines, then zlib-compressed lines ``NAME DOMAIN:ROLE PRIORITY URI
DISPNAME`` (``$`` in URI stands for NAME, ``-`` as DISPNAME for NAME).
"""

from __future__ import annotations

import zlib
from pathlib import Path


def write_inventory(
    source: Path, target: Path, project: str = "Python", version: str = "3.13"
) -> Path:
    """Write ``target`` from the list in ``source``.

    Args:
        source (pathlib.Path): the list: ``NAME DOMAIN:ROLE URI [DISPNAME]``
            a line; ``#`` starts a comment line.
        target (pathlib.Path): the inventory to write (parent directories
            are made).
        project (str): the project name in the header.
        version (str): the version in the header.

    Returns:
        pathlib.Path: ``target``.

    Raises:
        ValueError: a line with fewer than three fields.
        OSError: ``source`` cannot be read or ``target`` written.
    """
    lines = []
    for n, raw in enumerate(Path(source).read_text().splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        parts = raw.split(None, 3)
        if len(parts) < 3:
            raise ValueError(f"{source}:{n}: want NAME DOMAIN:ROLE URI [DISPNAME], got {raw!r}")
        name, role, uri = parts[:3]
        disp = parts[3] if len(parts) > 3 else "-"
        prio = "-1" if role == "std:label" else "1"
        lines.append(f"{name} {role} {prio} {uri} {disp}")
    header = (
        f"# Sphinx inventory version 2\n# Project: {project}\n# Version: {version}\n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    data = header.encode() + zlib.compress(("\n".join(lines) + "\n").encode())
    if not target.exists() or target.read_bytes() != data:
        target.write_bytes(data)
    return target
