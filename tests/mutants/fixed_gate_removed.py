# SPDX-License-Identifier: Apache-2.0
"""cuda-core-1.2-fixed without its finalization fix: no in-flight gate."""

FILE = "include/deferred_cleanup/comparison/policies.hpp"
FIND = "  /// accepting_, finalizing and head_ tests are made inside it.\n  static constexpr bool gate = true;\n"
REPLACE = "  /// accepting_, finalizing and head_ tests are made inside it.\n  static constexpr bool gate = false;  // MUTANT: no gate\n"
PROPERTY = "no cuda-core-1.2-fixed destructor callback that passed the shipped finalizing test calls Py_AddPendingCall after finalization began"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_shutdown.py -k cuda_core_fixed_waits_out"]
KILLING_TESTS = ["test_cuda_core_fixed_waits_out_a_producer_held_after_its_finalizing_check"]
NOTE = "the exit hook still closes accepting_, but nothing waits for the producer held after its test; the backstop releases it after finalization, so its call crashes 3.10-3.12 and is counted in host_calls_after_teardown on 3.13+"
