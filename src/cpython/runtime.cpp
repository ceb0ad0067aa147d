// SPDX-License-Identifier: Apache-2.0
//
// runtime.cpp: see runtime.hpp.
#include "runtime.hpp"

#include <Python.h>

namespace deferred_cleanup::cpython::detail {

bool finalizing_now() noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

bool python_frame_running() noexcept {
  PyFrameObject* f = PyThreadState_GetFrame(PyThreadState_Get());  // new reference or NULL
  Py_XDECREF(f);
  return f != nullptr;
}

}  // namespace deferred_cleanup::cpython::detail
