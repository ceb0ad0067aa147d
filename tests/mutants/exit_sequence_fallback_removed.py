# SPDX-License-Identifier: Apache-2.0
"""3.10-3.13: the exit sequence's fallback atexit handler does nothing, so an
interrupt that ends threading._shutdown before the sequence's threading
callback runs skips the exit sequence (nothing waits for due destructors)."""

FILE = "src/cpython/exit_phase.cpp"
FIND = """\
  if (h->registered || h->done) Py_RETURN_NONE;
"""
REPLACE = """\
  Py_RETURN_NONE;  // MUTANT: no fallback
"""
PROPERTY = "an interrupt that ends threading._shutdown early does not skip the exit sequence (3.10-3.13: its fallback atexit handler runs it)"
KILLED_BY = ["pytest:cp312-pyenv:tests/test_exit.py -k threading_shutdown"]
KILLING_TESTS = ["test_an_interrupt_that_ends_threading_shutdown_does_not_skip_the_exit_sequence"]
