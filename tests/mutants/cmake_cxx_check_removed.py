# SPDX-License-Identifier: Apache-2.0
"""A consumer target without CXX is let through: CMake drops the host's sources silently."""

FILE = "cmake/deferred_cleanupHost.cmake"
FIND = """\
        _deferred_cleanup_cxx_error("${t}" "${d}")
"""
REPLACE = """\
        set(_dc_mutant_unused "${t}")  # MUTANT: no message, the sources are dropped
"""
PROPERTY = "a C-only project linking deferred_cleanup::cpython stops at configure time with one message to enable CXX"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_capi.py"]
KILLING_TESTS = [
    "test_a_c_only_project_stops_at_configure_with_one_message_installed[C]",
    "test_a_c_only_project_stops_at_configure_with_one_message_source_tree[C]",
]
