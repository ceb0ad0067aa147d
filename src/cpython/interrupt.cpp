// SPDX-License-Identifier: Apache-2.0
//
// interrupt.cpp: the interrupt rule (interrupt.hpp), shared by the library's
// host and the reference module's.
#include "interrupt.hpp"

#include "runtime.hpp"

namespace deferred_cleanup::cpython::detail {

namespace {

void bump(std::atomic<std::uint64_t>* counter) noexcept {
  if (counter != nullptr) counter->fetch_add(1, std::memory_order_relaxed);  // statistics only
}

}  // namespace

bool InterruptRule::report(PyObject* where) noexcept {
  bool interrupt = false;
  if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt) || PyErr_ExceptionMatches(PyExc_SystemExit)) {
    if (type_ == nullptr) {
      PyErr_Fetch(&type_, &value_, &tb_);
      PyErr_NormalizeException(&type_, &value_, &tb_);
      return true;
    }
    interrupt = true;
    bump(counters_.later_interrupts);  // a later interrupt of the drain
  }
  bump(counters_.unraisable);
  PyErr_WriteUnraisable(where);
  return interrupt;
}

int InterruptRule::after_drain() noexcept {
  if (depth_ > 0) return 0;  // inside a cleanup: the outermost drain delivers it
  if (type_ == nullptr) return 0;
  if (!python_frame_running()) {
    // CPython's exit-time flush: a -1 here would become a SystemError
    // chained to the interrupt (interrupt.hpp).  Kept for the exit sequence,
    // which runs after the flush in the atexit phase.
    bump(counters_.held_at_flush);
    return 0;
  }
  return restore_kept();  // CPython raises it in the interrupted code
}

bool InterruptRule::stop_drain(bool exit_sequence_running) noexcept {
  if (depth_ > 0 || exit_sequence_running) return false;
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  if (PyErr_CheckSignals() < 0) report(nullptr);
  PyErr_Restore(t, v, tb);
  return type_ != nullptr && python_frame_running();
}

int InterruptRule::deliver() noexcept {
  if (depth_ > 0) return 0;  // inside a cleanup: the outermost drain raises it
  return restore_kept();
}

int InterruptRule::restore_kept() noexcept {
  if (type_ == nullptr) return 0;
  bump(counters_.delivered);  // an interrupt delivered
  PyErr_Restore(type_, value_, tb_);
  type_ = value_ = tb_ = nullptr;
  return -1;
}

}  // namespace deferred_cleanup::cpython::detail
