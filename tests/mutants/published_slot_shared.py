# SPDX-License-Identifier: Apache-2.0
"""The published-queue slot loses its hidden visibility: g++ emits it as an STB_GNU_UNIQUE symbol, one per process."""

FILE = "include/deferred_cleanup/callback.hpp"
FIND = "DEFERRED_CLEANUP_LOCAL inline std::atomic<BasicQueue<P>*> g_published_queue{nullptr};\n"
REPLACE = "inline std::atomic<BasicQueue<P>*> g_published_queue{nullptr};  // MUTANT: default visibility\n"
PROPERTY = "two extensions that use the headers, built with default visibility and loaded into one process, each publish and drain their own queue"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_isolation.py"]
KILLING_TESTS = [
    "test_no_gnu_unique_symbol_in_an_extension_built_with_default_visibility",
    "test_two_extensions_in_one_process_each_drain_their_own_items",
]
NOTE = "The dynamic loader binds every STB_GNU_UNIQUE symbol of a name to one definition process-wide, RTLD_LOCAL or not: the second extension's hand_off_published pushes onto the first one's queue (half of its items are missing from its own drain)."
