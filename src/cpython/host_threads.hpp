// SPDX-License-Identifier: Apache-2.0
//
// host_threads.hpp: the host state bound to threads, and the rules about it
// that every CPython host built on this library shares (not installed as
// API; hidden visibility): producers inside Py_AddPendingCall, the Py_AtExit
// backstop's bounded wait for them, and the reset of that state in a fork()
// child.  Used by the library's host (host.cpp, exit.cpp, fork.cpp) and the
// reference module's (reference/src/host.cpp, exit.cpp, fork.cpp).
#pragma once

#include <atomic>
#include <cstdint>

namespace deferred_cleanup::cpython::detail {

/// A producer announces itself before Py_AddPendingCall.  Thread: any (no
/// thread state needed).  Blocking: never.  Memory ordering: seq_cst, so
/// that with the backstop's seq_cst store of its torn-down flag then load of
/// `in_host` (store buffering) either the backstop sees this producer or the
/// producer sees the flag.  Errors: none.  Source: Py_AddPendingCall needs
/// no thread state (Python/ceval_gil.c, v3.12.0).
inline void enter_host_call(std::atomic<std::uint32_t>& in_host) noexcept {
  in_host.fetch_add(1, std::memory_order_seq_cst);
}

/// The producer left Py_AddPendingCall.  Thread: the one that entered.
/// Blocking: never.  Memory ordering: release (read by the backstop's
/// wait).  Errors: none.
inline void leave_host_call(std::atomic<std::uint32_t>& in_host) noexcept {
  in_host.fetch_sub(1, std::memory_order_release);
}

/// The Py_AtExit backstop's wait: sleeps 1 ms at a time until no producer
/// is inside the host call or the steady_clock time `deadline_ns` (ns since
/// its epoch) has passed.  Returns whether none is left.  Thread: the one
/// running Py_FinalizeEx, after the interpreter is gone (no Python API).
/// Blocking: up to the deadline.  Memory ordering: seq_cst loads (see
/// enter_host_call).  Errors: none.  Source: Py_AtExit callbacks run after
/// the interpreter is finalized (Doc/c-api/sys.rst, v3.12.0).
bool wait_for_host_calls(const std::atomic<std::uint32_t>& in_host,
                         std::int64_t deadline_ns) noexcept;

/// What reset_threads_after_fork found.
struct ForkChild {
  bool same_thread;        // the parent's main thread forked
  bool left_pending_call;  // another thread forked while the main thread ran a pending call
};

/// In a fork() child: the forking thread becomes the main thread
/// (`main_ident`), no producer is inside the host call (`in_host`), and a
/// pending call the parent's main thread was running is over
/// (`in_pending_call`, when another thread forked).  Thread: the child's
/// only thread, GIL held (os.register_at_fork(after_in_child=...)).
/// Blocking: never.  Memory ordering: relaxed (one thread in the child).
/// Errors: none.  Source: only the forking thread exists in the child
/// (POSIX fork(2)); os.register_at_fork, Doc/library/os.rst (3.7+).
ForkChild reset_threads_after_fork(unsigned long& main_ident, std::atomic<std::uint32_t>& in_host,
                                   bool& in_pending_call) noexcept;

}  // namespace deferred_cleanup::cpython::detail
