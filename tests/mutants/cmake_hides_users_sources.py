# SPDX-License-Identifier: Apache-2.0
"""The installed config imposes -fvisibility=hidden on every source of the consumer."""

FILE = "cmake/deferred_cleanupConfig.cmake.in"
FIND = """\
  _deferred_cleanup_host_sources(${_deferred_cleanup_cpython_sources})
"""
REPLACE = """\
  _deferred_cleanup_host_sources(${_deferred_cleanup_cpython_sources})
  set_property(TARGET deferred_cleanup::cpython PROPERTY INTERFACE_COMPILE_OPTIONS
                                                         -fvisibility=hidden)  # MUTANT
"""
PROPERTY = "the user's own sources keep their visibility; only the host's sources are hidden"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_capi.py"]
KILLING_TESTS = ["test_the_users_symbols_stay_exported_and_the_hosts_are_hidden"]
