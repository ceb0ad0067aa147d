#!/usr/bin/env python3
"""Provenance stamps: which code a measured figure measured.

Every data file that a docs page renders carries one stamp, under the key
``"provenance"``::

    {"commit": "<40 hex>", "dirty": false,
     "globs": ["reference/include/deferred_cleanup/*.hpp", ...],
     "sources": {"reference/include/deferred_cleanup/queue.hpp": "<sha256>", ...},
     "sources_sha256": "<sha256 over the sorted (path, hash) pairs>"}

``commit`` is ``git rev-parse HEAD`` of the tree that was measured and
``dirty`` says whether any stamped source differed from that commit.  The
hashes are of the working-tree files themselves, so a stamp stays checkable
when the commit is not (a stamp made before its commit existed, a squash).

``changed(stamp)`` lists the stamped sources that differ now (edited,
removed, or new files matching a glob): the docs build shows "measured at
<commit>; since then <files> changed" on the page when it is not empty.

Standard library only.  Usage::

    tools/provenance.py stamp FILE.json [--glob G ...]   add or renew FILE's stamp
    tools/provenance.py check FILE.json                   print the changed sources; exit 1 if any
    tools/provenance.py show [--glob G ...]               print a stamp of the tree as it is
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The core: what every figure about the queue, the drain or the gate measured.
CORE_GLOBS = ["reference/include/deferred_cleanup/*.hpp"]


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
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def stamp(globs: list[str] | None = None, repo: Path = REPO) -> dict:
    """The stamp of the tree as it is now.

    :param globs: source globs relative to ``repo`` (default: the core headers)
    :param repo: the repository root
    :returns: a JSON-ready dict (see the module docstring)
    :raises ValueError: when no file matches the globs
    """
    globs = list(globs or CORE_GLOBS)
    files = _files(globs, repo)
    if not files:
        raise ValueError(f"no source matches {globs} under {repo}")
    sources = {f: _sha(repo / f) for f in files}
    commit = _git(repo, "rev-parse", "HEAD") or "unknown"
    dirty = bool(_git(repo, "status", "--porcelain", "--", *files))
    return {"commit": commit, "dirty": dirty, "globs": globs, "sources": sources,
            "sources_sha256": _aggregate(sources)}


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stamp")
    s.add_argument("file", type=Path)
    s.add_argument("--glob", action="append", dest="globs")
    s = sub.add_parser("check")
    s.add_argument("file", type=Path)
    s = sub.add_parser("show")
    s.add_argument("--glob", action="append", dest="globs")
    a = ap.parse_args(argv)
    if a.cmd == "show":
        print(json.dumps(stamp(a.globs), indent=2))
        return 0
    data = json.loads(a.file.read_text())
    if a.cmd == "stamp":
        data["provenance"] = stamp(a.globs or data.get("provenance", {}).get("globs"))
        a.file.write_text(json.dumps(data, indent=2) + "\n")
        return 0
    diff = changed(data["provenance"])
    for f in diff:
        print(f)
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
