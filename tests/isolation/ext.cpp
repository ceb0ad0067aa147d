// SPDX-License-Identifier: Apache-2.0
// ext.cpp: a minimal extension built twice (DC_EXT_NAME = iso_a, iso_b) from
// the same source against the core headers, with default visibility, by
// tests/test_isolation.py.  Both are loaded into one interpreter; each must
// see only its own queue.
//
// run(n): make n typed items on the main thread; a std::thread hands half of
// them off with hand_off(queue, item) and half through the published queue
// (hand_off_published, the path a one-pointer C callback takes); join; drain
// this module's queue on the main thread.  Returns (cleaned, own_published):
// how many of this module's payloads were destroyed so far, and whether the
// published queue is this module's own.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "deferred_cleanup/deferred_cleanup.hpp"

#ifndef DC_EXT_NAME
#error "build with -DDC_EXT_NAME=<module name>"
#endif
#define DC_CAT2(a, b) a##b
#define DC_CAT(a, b) DC_CAT2(a, b)
#define DC_STR2(a) #a
#define DC_STR(a) DC_STR2(a)

namespace dc = deferred_cleanup;

namespace {

std::thread::id g_main;
long g_cleaned = 0;   // main thread only: the payloads' destructors run there
long g_off_main = 0;  // payloads destroyed on another thread (must stay 0)
dc::Host g_host;
dc::Queue* g_queue = nullptr;  // this module's queue, never freed

bool is_main_thread() { return std::this_thread::get_id() == g_main; }

struct Payload {
  ~Payload() { is_main_thread() ? ++g_cleaned : ++g_off_main; }
};

PyObject* run(PyObject*, PyObject* arg) {
  const long n = PyLong_AsLong(arg);
  if (n < 0 || PyErr_Occurred()) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "n must be >= 0");
    return nullptr;
  }
  std::vector<std::unique_ptr<dc::Item<Payload>>> items;
  for (long i = 0; i < n; ++i) items.push_back(dc::make_item<Payload>());
  std::thread worker([&items] {
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i % 2 == 0) {
        dc::hand_off(*g_queue, std::move(items[i]));
      } else {
        dc::hand_off_published<dc::ReferencePolicy>(items[i].release()->node());
      }
    }
  });
  PyThreadState* saved = PyEval_SaveThread();  // the worker may need the GIL: never here
  worker.join();
  PyEval_RestoreThread(saved);
  dc::drain_now(*g_queue);
  const bool own = dc::published_queue<dc::ReferencePolicy>() == g_queue;
  return Py_BuildValue("(lOl)", g_cleaned, own ? Py_True : Py_False, g_off_main);
}

PyMethodDef kMethods[] = {
    {"run", run, METH_O, "run(n) -> (cleaned, own_published, off_main)"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT,
    DC_STR(DC_EXT_NAME),
    nullptr,
    -1,
    kMethods,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
};

}  // namespace

PyMODINIT_FUNC DC_CAT(PyInit_, DC_EXT_NAME)(void) {
  g_main = std::this_thread::get_id();
  g_host.add_pending_call = &Py_AddPendingCall;
  g_host.is_main_thread = &is_main_thread;
  g_queue = new dc::Queue(&g_host);  // never freed
  dc::publish_queue(g_queue);        // run() reports whether it won in this module
  return PyModule_Create(&kModule);
}
