# SPDX-License-Identifier: Apache-2.0
"""interrupts_unraisable counts every unraisable cleanup error, not only the later interrupts."""

FILE = "reference/src/host.cpp"
FIND = """\
    g_counters.interrupts_unraisable.fetch_add(1, std::memory_order_relaxed);  // statistics only
  }
  PyErr_WriteUnraisable(where);
"""
REPLACE = """\
  }
  g_counters.interrupts_unraisable.fetch_add(1, std::memory_order_relaxed);  // MUTANT: any error
  PyErr_WriteUnraisable(where);
"""
PROPERTY = (
    "interrupts_unraisable counts the later interrupts of a drain reported to "
    "sys.unraisablehook, never an ordinary cleanup error"
)
KILLED_BY = ["pytest:cp312-pyenv:tests/test_interrupt.py -k ordinary_exceptions"]
KILLING_TESTS = ["test_ordinary_exceptions_still_go_to_unraisablehook"]
