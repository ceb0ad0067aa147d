# SPDX-License-Identifier: Apache-2.0
"""The host's sources are compiled with the consumer's default visibility: dc_ symbols exported."""

FILE = "cmake/deferred_cleanupHost.cmake"
FIND = """\
        PROPERTY COMPILE_OPTIONS "$<$<CXX_COMPILER_ID:GNU,Clang,AppleClang>:-fvisibility=hidden>")
"""
REPLACE = """\
        PROPERTY COMPILE_OPTIONS "-DDC_MUTANT_NOT_HIDDEN=1")
"""
PROPERTY = (
    "the host library's symbols are hidden in the user's extension: two extensions share none"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_capi.py"]
KILLING_TESTS = ["test_the_users_symbols_stay_exported_and_the_hosts_are_hidden"]
