# SPDX-License-Identifier: Apache-2.0
"""dc_item_new() makes an item with a NULL cleanup (its drain would call NULL)."""

FILE = "src/cpython/host.cpp"
FIND = """\
  if (cleanup == nullptr) return nullptr;  // no item without a cleanup (deferred_cleanup.h)
"""
REPLACE = """\
  // MUTANT: a NULL cleanup accepted
"""
PROPERTY = "dc_item_new returns NULL, no exception set, for a NULL cleanup"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_capi.py"]
KILLING_TESTS = ["test_null_cleanup_null_item_and_foreign_host_are_refused"]
