# SPDX-License-Identifier: Apache-2.0
"""dc_item_payload() returns NULL instead of the payload."""

FILE = "src/cpython/host.cpp"
FIND = """\
void* dc_item_payload(const dc_item* item) { return item != nullptr ? item->payload : nullptr; }
"""
REPLACE = """\
void* dc_item_payload(const dc_item*) { return nullptr; }  // MUTANT: the payload lost
"""
PROPERTY = "dc_item_payload returns the payload the item was made with"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_capi.py"]
KILLING_TESTS = ["test_item_payload_returns_the_payload_it_was_made_with"]
