// SPDX-License-Identifier: Apache-2.0
//
// interrupt.hpp: the interrupt rule, once, for every CPython host built on
// this library (not installed as API; hidden visibility).  The library's own
// host (host.cpp, exit.cpp) and the reference module deferred_cleanup._native
// (reference/src/host.cpp, exit.cpp) each own one InterruptRule and count
// into their own statistics.
//
// The rule: the first KeyboardInterrupt/SystemExit a cleanup raises (or a
// signal handler run between two cleanups) is kept and the drain stops after
// that cleanup (stop_drain; drain.hpp puts the rest back on the queue, in
// order, with a pending call re-armed, so each still runs exactly once).  It
// is raised where the outermost drain was entered: the pending call returns
// -1 with it set (after_drain; CPython raises it in the interrupted code), an
// entry point raises it (deliver).  In CPython's exit-time pending-call
// flush, where no Python frame runs, it is held and the host's exit sequence
// raises it.  A drain that runs inside a cleanup delivers nothing: raising
// there would hand the exception to that cleanup, or to a hook that drops it.
// Later ones of the same drain, and every other exception a cleanup leaves
// set, go to sys.unraisablehook.
#pragma once

#include <Python.h>

#include <atomic>
#include <cstdint>

namespace deferred_cleanup::cpython::detail {

/// Where an InterruptRule counts (statistics only: relaxed increments that
/// order nothing).  Each pointer may be nullptr: not counted.
struct InterruptCounters {
  std::atomic<std::uint64_t>* delivered = nullptr;         // kept interrupts raised
  std::atomic<std::uint64_t>* later_interrupts = nullptr;  // later ones sent to unraisablehook
  std::atomic<std::uint64_t>* unraisable = nullptr;        // everything sent to unraisablehook
  std::atomic<std::uint64_t>* held_at_flush = nullptr;     // kept in the exit-time flush
};

/// The interrupt rule of one host (see the file comment).  One per host,
/// static storage.  Thread: every member is called on the main thread with
/// the GIL held (the thread that runs cleanups); the state is plain, guarded
/// by the GIL.  Blocking: never (stop_drain runs CPython's signal handlers,
/// which are Python code).  Memory ordering: the counters are relaxed
/// statistics.  Errors: none thrown; the Python error state is as each
/// member states.  Sources: PyErr_WriteUnraisable and PyErr_CheckSignals,
/// Doc/c-api/exceptions.rst (v3.12.0); _Py_FinishPendingCalls turns a
/// pending call's -1 into a chained SystemError in the exit-time flush
/// (Python/ceval.c v3.10.0 and v3.11.0, Python/ceval_gil.c v3.12.0 and
/// v3.13.0).
class InterruptRule {
 public:
  explicit InterruptRule(InterruptCounters counters) noexcept : counters_(counters) {}
  InterruptRule(const InterruptRule&) = delete;
  InterruptRule& operator=(const InterruptRule&) = delete;

  /// A cleanup starts / ends (they nest: a cleanup may run a drain).
  void begin_cleanup() noexcept { ++depth_; }
  void end_cleanup() noexcept { --depth_; }

  /// The exception set now, left by a cleanup or a signal handler: the first
  /// KeyboardInterrupt/SystemExit while none is kept is kept (the error
  /// state cleared); anything else goes to sys.unraisablehook with `where`
  /// (may be nullptr) as its object.  Requires an exception set.  Returns
  /// whether it was a KeyboardInterrupt/SystemExit (kept, or a later one).
  bool report(PyObject* where) noexcept;

  /// Host::after_drain, the pending call's return value: -1 with the kept
  /// interrupt set when one is kept, this is the outermost drain and a
  /// Python frame runs; else 0 with the error state untouched (in the
  /// exit-time flush the interrupt stays kept, counted held_at_flush).
  int after_drain() noexcept;

  /// Host::stop_drain: runs CPython's signal handlers (the current exception
  /// saved around them; a handler's exception goes to report), then whether
  /// the drain should stop now: an interrupt is kept, this drain is the
  /// outermost, `exit_sequence_running` is false (the exit sequence releases
  /// everything) and a Python frame runs to raise into.
  bool stop_drain(bool exit_sequence_running) noexcept;

  /// An entry point's or the exit sequence's delivery: -1 with the kept
  /// interrupt set (no longer kept), or 0 when none is kept or a cleanup is
  /// running (the outermost drain delivers it).
  int deliver() noexcept;
  /// Whether an interrupt is kept now (not yet delivered).
  bool kept() const noexcept { return type_ != nullptr; }

 private:
  int restore_kept() noexcept;

  InterruptCounters counters_;
  int depth_ = 0;             // cleanups running now, nested ones included
  PyObject* type_ = nullptr;  // the kept interrupt (strong references) or nullptr
  PyObject* value_ = nullptr;
  PyObject* tb_ = nullptr;
};

}  // namespace deferred_cleanup::cpython::detail
