// SPDX-License-Identifier: Apache-2.0
//
// runtime.hpp: questions about the running CPython that every host built on
// this library asks the same way (not installed as API; hidden visibility).
// The library's own host (host.cpp, exit.cpp) and the reference module
// deferred_cleanup._native (reference/src/, which links
// deferred_cleanup::cpython) both use these, so each rule lives once.
#pragma once

namespace deferred_cleanup::cpython::detail {

/// Whether CPython's finalizing flag is set: Py_IsFinalizing() on 3.13+,
/// _Py_IsFinalizing() on 3.10-3.12 (the public name came in 3.13).
/// Thread: any, with or without a thread state.  Blocking: never.
/// Memory ordering: CPython's own (an atomic load of the runtime's
/// finalizing thread state).  Errors: none.
/// Source: Include/pylifecycle.h (v3.13.0), Include/cpython/pylifecycle.h
/// (v3.10.0 to v3.12.0).
bool finalizing_now() noexcept;

/// Whether Python code runs on this thread: a frame to raise an exception
/// into.  A pending call runs with none only in CPython's exit-time flush
/// (_Py_FinishPendingCalls, called by Py_FinalizeEx after the main module
/// returned), or from C code that calls Py_MakePendingCalls outside any
/// frame.  Thread: one holding the GIL (attached thread state).  Blocking:
/// never.  Memory ordering: n/a (this thread's own state).  Errors: none.
/// Source: PyThreadState_GetFrame, Doc/c-api/init.rst (3.9+);
/// Python/pylifecycle.c Py_FinalizeEx (v3.10.0 to v3.14.0).
bool python_frame_running() noexcept;

}  // namespace deferred_cleanup::cpython::detail
