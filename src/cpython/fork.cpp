// SPDX-License-Identifier: Apache-2.0
//
// fork.cpp: the CPython host in a fork() child.  Only the forking thread
// exists in the child (POSIX fork(2)): producers inside Py_AddPendingCall and
// a pending call the main thread was running are gone.  The handler,
// registered with os.register_at_fork(after_in_child=...), resets the host's
// thread-bound state and schedules a drain of the items the child inherited.
#include "host_internal.hpp"

namespace deferred_cleanup::cpython::detail {

namespace {

/// Thread: the child's only thread, GIL held (os.register_at_fork).
PyObject* after_fork_child(PyObject*, PyObject*) {
  // The thread-bound state (host_threads.hpp), then the queue's.
  const bool same =
      reset_threads_after_fork(g.main_ident, g.in_host, g.in_pending_call).same_thread;
  g.queue->reset_after_fork(same);
  if (!g.queue->empty_snapshot()) retry_schedule(*g.queue);
  Py_RETURN_NONE;
}

PyMethodDef g_after_fork_def = {"_deferred_cleanup_after_fork_child", &after_fork_child,
                                METH_NOARGS, nullptr};

}  // namespace

int register_fork() {
  PyObject* os = PyImport_ImportModule("os");
  if (os == nullptr) return -1;
  PyObject* reg = PyObject_GetAttrString(os, "register_at_fork");
  Py_DECREF(os);
  if (reg == nullptr) {  // no fork() on this platform
    PyErr_Clear();
    return 0;
  }
  PyObject* f = PyCFunction_New(&g_after_fork_def, nullptr);
  PyObject* args = PyTuple_New(0);
  PyObject* kw = f != nullptr ? Py_BuildValue("{s:O}", "after_in_child", f) : nullptr;
  PyObject* r = (args != nullptr && kw != nullptr) ? PyObject_Call(reg, args, kw) : nullptr;
  Py_XDECREF(f);
  Py_XDECREF(args);
  Py_XDECREF(kw);
  Py_DECREF(reg);
  if (r == nullptr) return -1;
  Py_DECREF(r);
  return 0;
}

}  // namespace deferred_cleanup::cpython::detail
