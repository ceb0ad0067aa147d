// SPDX-License-Identifier: Apache-2.0
// deferred_cleanup._native: the one extension module.  Each part of the
// project registers its own submodule; this file only wires them together.
#include <pybind11/pybind11.h>

#include "host.hpp"

#ifndef DC_TEST_HOOKS
#define DC_TEST_HOOKS 0
#endif

namespace deferred_cleanup::bindings {
void register_probe(pybind11::module_& m);  // reference/src/probe.cpp
}  // namespace deferred_cleanup::bindings
namespace deferred_cleanup::host {
void register_guard(pybind11::module_& m);  // reference/src/host_pep788.cpp
}  // namespace deferred_cleanup::host

// Declared safe without the GIL (free-threaded builds): Graph methods run in
// the Graph object's critical section, g_graphs_mu guards the graphs' shared
// state, the drivers lock their own, and the queue is lock-free and drains on
// the main thread only (host.hpp says what protects what).
PYBIND11_MODULE(_native, m, pybind11::mod_gil_not_used()) {
  // The queue and its shutdown hook are process-wide and bound to the main
  // interpreter (see deferred_cleanup/__init__.py, which refuses first).
  if (PyInterpreterState_Get() != PyInterpreterState_Main()) {
    throw pybind11::import_error(
        "deferred_cleanup._native can only be imported in the main interpreter");
  }
  m.doc() = "deferred-cleanup native core: the pending-call probe and the reference queue";
  auto probe = m.def_submodule("probe", "CPython pending-call probe (measurements)");
  deferred_cleanup::bindings::register_probe(probe);
  // The host first (it chooses the variant and publishes the queue), then the
  // Python API and the test hooks that use it.
  deferred_cleanup::host::init_host(m);
  deferred_cleanup::host::init_exit(m);
  deferred_cleanup::host::init_fork(m);
  deferred_cleanup::host::register_api(m);
#if DC_TEST_HOOKS
  deferred_cleanup::host::register_test_hooks(m);  // reference/testing/test_hooks.cpp
#endif
  // Whether this build has the `_test_` hooks (tests that need one skip
  // without them, tests/conftest.py).
  m.attr("TEST_HOOKS") = pybind11::bool_(DC_TEST_HOOKS != 0);
  deferred_cleanup::host::register_guard(m);
}
