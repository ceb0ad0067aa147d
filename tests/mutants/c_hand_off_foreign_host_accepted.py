# SPDX-License-Identifier: Apache-2.0
"""dc_hand_off() takes an item whatever host it is given (NULL, or another extension's)."""

FILE = "src/cpython/host.cpp"
FIND = """\
  if (item == nullptr || host != reinterpret_cast<dc_host*>(&g)) return -1;
"""
REPLACE = """\
  (void)host;                      // MUTANT: the host argument is not checked
  if (item == nullptr) return -1;  // (void): _native builds src/cpython with -Werror
"""
PROPERTY = (
    "dc_hand_off returns -1 for a host that is not this extension's; the item stays the caller's"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_capi.py"]
KILLING_TESTS = ["test_null_cleanup_null_item_and_foreign_host_are_refused"]
