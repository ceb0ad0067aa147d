# SPDX-License-Identifier: Apache-2.0
"""cuda-core-1.2-fixed without its exit fix: no atexit-phase exit hook."""

FILE = "include/deferred_cleanup/comparison/policies.hpp"
FIND = "  static constexpr bool exit_release = true;\n"
REPLACE = "  static constexpr bool exit_release = false;  // MUTANT: no exit hook\n"
PROPERTY = "cuda-core-1.2-fixed releases every payload of a graph destroyed before exit whose destructor comes within the exit wait, on the main thread, while the interpreter is alive"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_exit.py -k cuda_core_exit_hole"]
KILLING_TESTS = ["test_cuda_core_exit_hole_and_its_minimal_fix[cuda-core-1.2-fixed]"]
NOTE = "without the hook the fixed variant behaves as shipped at exit: destructors due 2 s after the last line come after finalization began, and nothing releases them"
