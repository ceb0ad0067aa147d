# SPDX-License-Identifier: Apache-2.0
"""``python -m deferred_cleanup --includes`` / ``--cmakedir``: build flags for
an extension that uses the C++ headers, as ``python -m pybind11`` prints them.
"""

from __future__ import annotations

import argparse
import sys
import sysconfig

from ._paths import get_cmake_dir, get_include


def main(argv: list[str] | None = None) -> int:
    """Print what the options ask for, one line each, in the order given.

    Args:
        argv (list[str] | None): the arguments; ``sys.argv[1:]`` when None.

    Returns:
        int: 0; 2 (from argparse) on a bad option; 1 when a path is missing.

    Raises:
        SystemExit: from argparse, on ``--help`` or a bad option.
    """
    ap = argparse.ArgumentParser(
        prog="python -m deferred_cleanup",
        description="Paths for building an extension against deferred_cleanup's C++ headers.",
    )
    ap.add_argument(
        "--includes",
        action="store_true",
        help="the -I flags: deferred_cleanup's headers, then this Python's",
    )
    ap.add_argument(
        "--cmakedir", action="store_true", help="the directory of deferred_cleanupConfig.cmake"
    )
    a = ap.parse_args(argv)
    if not (a.includes or a.cmakedir):
        ap.print_usage(sys.stderr)
        return 2
    try:
        if a.includes:
            dirs = [get_include(), sysconfig.get_paths()["include"]]
            print(" ".join(f"-I{d}" for d in dict.fromkeys(dirs)))
        if a.cmakedir:
            print(get_cmake_dir())
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
