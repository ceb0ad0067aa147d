#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Provenance stamps: which code a measured figure measured.

Every data file that a docs page renders carries one stamp, under the key
``"provenance"``::

    {"commit": "<40 hex>", "dirty": false,
     "globs": ["include/deferred_cleanup/*.hpp", ...],
     "sources": {"include/deferred_cleanup/queue.hpp": "<sha256>", ...},
     "sources_sha256": "<sha256 over the sorted (path, hash) pairs>"}

``commit`` is ``git rev-parse HEAD`` of the tree that was measured and
``dirty`` says whether any stamped source differed from that commit.  The
hashes are of the working-tree files themselves, so a stamp stays checkable
when the commit is not (a stamp made before its commit existed, a squash).

``changed(stamp)`` lists the stamped sources that differ now (edited,
removed, or new files matching a glob): the docs build shows "measured at
<commit>; since then <files> changed" on the page when it is not empty.

Where the stamp lives (:func:`read_stamp`, :func:`write_stamp`):

* a JSON object: its key ``"provenance"``;
* a text file (a disassembly, a log excerpt): its first line,
  ``# provenance: {...}`` (the stamp as one line of JSON); pages quote such
  files by markers further down, so the line shows nowhere;
* any other file: a sidecar ``FILE.provenance.json`` holding the stamp.

``--at COMMIT`` stamps a figure measured at an older commit: the hashes are
those of the sources in that commit (``git show COMMIT:path``), so the docs
show what changed since.

Standard library only.  Usage::

    tools/provenance.py stamp FILE [--glob G ...] [--at COMMIT]   add or renew FILE's stamp
    tools/provenance.py check FILE                   print the changed sources; exit 1 if any
    tools/provenance.py show [--glob G ...]          print a stamp of the tree as it is
    tools/provenance.py package-globs               print PACKAGE_GLOBS, one a line
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The core: what every figure about the queue, the drain or the gate measured.
CORE_GLOBS = ["include/deferred_cleanup/*.hpp"]

#: The package: the core headers, the CPython host library ``_native`` links, the
#: reference core and the Python package. The tools that stamp a measurement of
#: the package start their globs with this list (or with a named part of it), in
#: this order: a committed stamp's ``globs`` is compared with the tool's.
PACKAGE_GLOBS = [
    *CORE_GLOBS,
    "src/cpython/*.cpp",  # the CPython host library _native links
    "src/cpython/*.hpp",
    "reference/src/*.cpp",
    "reference/src/*.hpp",
    "reference/python/deferred_cleanup/*.py",
]


def package_globs(without: tuple[str, ...] = ()) -> list[str]:
    """PACKAGE_GLOBS in order, less the globs in ``without``.

    :param without: globs of PACKAGE_GLOBS to leave out (a tool whose committed
        stamp predates them); each must be one of PACKAGE_GLOBS
    :returns: a new list of globs (list[str])
    :raises ValueError: when ``without`` names a glob not in PACKAGE_GLOBS
    """
    unknown = set(without) - set(PACKAGE_GLOBS)
    if unknown:
        raise ValueError(f"not package globs: {sorted(unknown)}")
    return [g for g in PACKAGE_GLOBS if g not in without]


def _files(globs: list[str], repo: Path) -> list[str]:
    out: set[str] = set()
    for g in globs:
        out.update(str(p.relative_to(repo)) for p in repo.glob(g) if p.is_file())
    return sorted(out)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _aggregate(sources: dict[str, str]) -> str:
    h = hashlib.sha256()
    for k in sorted(sources):
        h.update(f"{k}\0{sources[k]}\n".encode())
    return h.hexdigest()


def _git(repo: Path, *args: str) -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def _files_at(globs: list[str], repo: Path, commit: str) -> dict[str, str]:
    """Path -> sha256 of the files matching ``globs`` in ``commit``."""
    listed = _git(repo, "ls-tree", "-r", "--name-only", commit).splitlines()
    out = {}
    for rel in listed:
        if any(fnmatch.fnmatchcase(rel, g) for g in globs):
            blob = subprocess.run(
                ["git", "-C", str(repo), "show", f"{commit}:{rel}"], capture_output=True, check=True
            ).stdout
            out[rel] = hashlib.sha256(blob).hexdigest()
    return out


def stamp(globs: list[str] | None = None, repo: Path = REPO, at: str | None = None) -> dict:
    """The stamp of the tree as it is now, or as it was at commit ``at``.

    :param globs: source globs relative to ``repo`` (default: the core headers)
    :param repo: the repository root
    :param at: a commit: hash the sources as they were there (a figure
        measured at an older commit); None: the working tree
    :returns: a JSON-ready dict (see the module docstring)
    :raises ValueError: when no file matches the globs
    """
    globs = list(globs or CORE_GLOBS)
    if at is not None:
        sources = _files_at(globs, repo, at)
        if not sources:
            raise ValueError(f"no source matches {globs} at {at}")
        commit = _git(repo, "rev-parse", at) or at
        return {
            "commit": commit,
            "dirty": False,
            "globs": globs,
            "sources": sources,
            "sources_sha256": _aggregate(sources),
        }
    files = _files(globs, repo)
    if not files:
        raise ValueError(f"no source matches {globs} under {repo}")
    sources = {f: _sha(repo / f) for f in files}
    commit = _git(repo, "rev-parse", "HEAD") or "unknown"
    dirty = bool(_git(repo, "status", "--porcelain", "--", *files))
    return {
        "commit": commit,
        "dirty": dirty,
        "globs": globs,
        "sources": sources,
        "sources_sha256": _aggregate(sources),
    }


def changed(st: dict, repo: Path = REPO) -> list[str]:
    """The stamped sources that differ in ``repo`` now, sorted.

    :param st: a stamp made by :func:`stamp`
    :param repo: the repository root
    :returns: paths edited or removed since the stamp, or new files matching its globs
    :raises KeyError: when ``st`` is not a stamp
    """
    now = {f: _sha(repo / f) for f in _files(st["globs"], repo)}
    old = st["sources"]
    return sorted(f for f in set(now) | set(old) if now.get(f) != old.get(f))


TEXT_PREFIX = "# provenance: "
TEXT_SUFFIXES = (".txt", ".log", ".md", ".csv")


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".provenance.json")


def read_stamp(path: Path) -> dict | None:
    """The stamp a data file carries, wherever it lives (see the module
    docstring); None when it carries none.

    :param path: the data file
    :returns: the stamp, or None
    :raises OSError: when the file cannot be read
    :raises ValueError: when a stamp is there but is not valid JSON
    """
    path = Path(path)
    side = _sidecar(path)
    if side.exists():
        return json.loads(side.read_text())
    if path.suffix == ".json":
        data = json.loads(path.read_text())
        return data.get("provenance") if isinstance(data, dict) else None
    if path.suffix in TEXT_SUFFIXES:
        first = path.read_text(errors="replace").split("\n", 1)[0]
        if first.startswith(TEXT_PREFIX):
            return json.loads(first[len(TEXT_PREFIX) :])
    return None


def write_stamp(path: Path, st: dict) -> None:
    """Put ``st`` into ``path``: the JSON key, the text file's first line (an
    old stamp line is replaced), or a sidecar for anything else.

    :param path: the data file (it must exist)
    :param st: a stamp made by :func:`stamp`
    :raises OSError: when the file cannot be read or written
    """
    path = Path(path)
    if path.suffix == ".json" and not _sidecar(path).exists():
        data = json.loads(path.read_text())
        if isinstance(data, dict):
            data["provenance"] = st
            path.write_text(json.dumps(data, indent=2) + "\n")
            return
    if path.suffix in TEXT_SUFFIXES and not _sidecar(path).exists():
        text = path.read_text()
        if text.startswith(TEXT_PREFIX):
            text = text.split("\n", 1)[1] if "\n" in text else ""
        path.write_text(TEXT_PREFIX + json.dumps(st, separators=(",", ":")) + "\n" + text)
        return
    _sidecar(path).write_text(json.dumps(st, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stamp")
    s.add_argument("file", type=Path)
    s.add_argument("--glob", action="append", dest="globs")
    s.add_argument("--at", help="the commit the figure was measured at (default: the working tree)")
    s = sub.add_parser("check")
    s.add_argument("file", type=Path)
    s = sub.add_parser("show")
    s.add_argument("--glob", action="append", dest="globs")
    sub.add_parser("package-globs", help="print PACKAGE_GLOBS, one a line (for shell scripts)")
    a = ap.parse_args(argv)
    if a.cmd == "package-globs":
        print("\n".join(PACKAGE_GLOBS))
        return 0
    if a.cmd == "show":
        print(json.dumps(stamp(a.globs), indent=2))
        return 0
    old = read_stamp(a.file)
    if a.cmd == "stamp":
        write_stamp(a.file, stamp(a.globs or (old or {}).get("globs"), at=a.at))
        return 0
    if old is None:
        print(f"{a.file}: no provenance stamp", file=sys.stderr)
        return 2
    diff = changed(old)
    for f in diff:
        print(f)
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
