# SPDX-License-Identifier: Apache-2.0
"""Where the installed package keeps its C++ headers and its CMake package.

The wheel installs, beside this file: ``include/`` (the core and the CPython
host's headers), ``src/cpython/`` (the host's sources, compiled into the
user's extension) and ``share/cmake/deferred_cleanup/`` (the package config
for ``find_package(deferred_cleanup CONFIG)``), as pybind11 and nanobind do
(cmake/package.cmake).  In a source checkout whose package was not installed
they are found in the checkout (``include/``, and the CMake files only after a
build of the package).
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent
_CHECKOUT = _HERE.parent.parent.parent  # reference/python/deferred_cleanup -> repository root


def get_include() -> str:
    """Return the directory to put on the include path for the C++ headers.

    ``#include "deferred_cleanup/deferred_cleanup.hpp"`` then finds the core.

    Returns:
        str: an absolute path; it contains ``deferred_cleanup/version.hpp``.
        The installed package's ``include/``, or a source checkout's.

    Raises:
        FileNotFoundError: neither the installed package nor a source checkout
            around this file holds the headers.
    """
    for d in (_HERE / "include", _CHECKOUT / "include"):
        if (d / "deferred_cleanup" / "version.hpp").is_file():
            return str(d)
    raise FileNotFoundError(
        f"deferred_cleanup: no C++ headers in {_HERE / 'include'} (is the package installed "
        "from a wheel?)"
    )


def get_cmake_dir() -> str:
    """Return the directory that holds ``deferred_cleanupConfig.cmake``.

    Pass it to CMake as ``-Ddeferred_cleanup_DIR=...`` (or put it on
    ``CMAKE_PREFIX_PATH``) before ``find_package(deferred_cleanup CONFIG)``.

    Returns:
        str: an absolute path; it contains ``deferred_cleanupConfig.cmake``
        and ``deferred_cleanupConfigVersion.cmake``.

    Raises:
        FileNotFoundError: the package was not installed from a wheel (a
            source checkout has the CMake files only in a build directory:
            use ``cmake --install`` there, or ``add_subdirectory``).
    """
    d = _HERE / "share" / "cmake" / "deferred_cleanup"
    if (d / "deferred_cleanupConfig.cmake").is_file():
        return str(d)
    raise FileNotFoundError(
        f"deferred_cleanup: no deferred_cleanupConfig.cmake in {d} (is the package installed "
        "from a wheel?)"
    )
