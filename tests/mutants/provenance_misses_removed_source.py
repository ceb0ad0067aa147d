# SPDX-License-Identifier: Apache-2.0
"""tools/provenance.py compares only the sources that exist now: a removed source goes unseen."""

FILE = "tools/provenance.py"
FIND = """\
    return sorted(f for f in set(now) | set(old) if now.get(f) != old.get(f))
"""
REPLACE = """\
    return sorted(f for f in now if now.get(f) != old.get(f))  # MUTANT: removed ones unseen
"""
PROPERTY = "a page's data is marked as measured on older code when a source it measured was removed"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_provenance.py"]
KILLING_TESTS = [
    "test_changed_lists_edited_removed_and_new_sources",
    "test_a_removed_source_alone_makes_the_stamp_stale",
]
