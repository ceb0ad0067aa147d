# SPDX-License-Identifier: Apache-2.0
"""dc_hand_off() pushes a NULL item (a crash in the push)."""

FILE = "src/cpython/host.cpp"
FIND = """\
  if (item == nullptr || host != reinterpret_cast<dc_host*>(&g)) return -1;
"""
REPLACE = """\
  if (host != reinterpret_cast<dc_host*>(&g)) return -1;  // MUTANT: a NULL item pushed
"""
PROPERTY = "dc_hand_off returns -1 for a NULL item, queuing nothing, from any thread"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_capi.py"]
KILLING_TESTS = ["test_null_cleanup_null_item_and_foreign_host_are_refused"]
