// drain.hpp: the consumer, on the CPython main thread.
//
// A drain takes the whole list with head_.exchange(nullptr), reverses it to
// push order and runs each cleanup exactly once.  It loops until a take comes
// back empty, so items that arrive while cleanups run are either taken by the
// next loop or, if they arrive after the last take, their producer sees
// scheduled_ == false and makes a new pending call.
//
// Two ways in:
//
//  * pending_call(): the function given to Py_AddPendingCall.  It clears
//    scheduled_ first and only then takes: clear-then-take is the consumer
//    half of the store-buffering pair (queue.hpp), seq_cst in the reference.
//    It always returns 0: a non-zero return would make CPython raise in
//    whatever Python code happens to be running (Python/ceval_gil.c,
//    make_pending_calls, v3.12.0), and a failed cleanup is not that code's
//    business.
//
//  * drain_at_entry(): called by every main-thread API entry point.  On
//    3.10-3.12 a pending call added from a thread with no thread state does
//    not run while the main thread stays busy in pure Python (gh-95820: the
//    eval breaker is only recomputed on the main thread when the GIL changes
//    hands).  The reference therefore drains directly at the next entry point
//    when the queue is non-empty, which bounds the delay by the time to the
//    next API call.  A direct drain does not clear scheduled_: a pending call
//    may still be outstanding and clearing the flag would let a producer add
//    a second one.  The outstanding call later finds the list empty (or takes
//    newer items), which is harmless.  The seed variant only retries
//    scheduling.  Off the main thread an entry point can only retry.
//
// Once the host is dead (shutdown.hpp) both ways return without touching any
// item: whatever is queued is leaked on purpose and counted by the backstop.
//
// Re-entrancy: a cleanup may run Python code, which may run another pending
// call or call an entry point.  The nested drain sees draining() and returns;
// the outer loop's next take collects what the nested one would have.
#pragma once

#include <cstddef>
#include <cstdint>

#include "deferred_cleanup/item.hpp"
#include "deferred_cleanup/queue.hpp"
#include "deferred_cleanup/scheduling.hpp"

namespace deferred_cleanup {

// [doc:drain]
/// Run the cleanups of a taken (FIFO) list, each exactly once.
///
/// Thread: main thread.  Blocks as long as the cleanups do.
/// Memory ordering: none of its own; the list was acquired by take_all().
/// Each `next` is read before the item's cleanup runs, because the cleanup
/// may free the item.
/// Errors: none; cleanups are noexcept and a Python error inside one is the
/// host's to report (sys.unraisablehook), so one bad payload never stops
/// the rest.
/// Source: cuda-python PR #2371.
/// @param queue the queue whose statistics are updated
/// @param list items returned by Queue::take_all()
/// @return the number of cleanups run
inline std::size_t run_list(Queue& queue, DeferredCleanupItem* list) noexcept {
  std::size_t n = 0;
  while (list != nullptr) {
    DeferredCleanupItem* next = list->next;  // read before cleanup may free the item
    run_cleanup(list);
    queue.stats.cleaned.fetch_add(1, std::memory_order_relaxed);  // statistics only
    ++n;
    list = next;
  }
  return n;
}

/// Take and run until a take comes back empty.  Does not touch scheduled_.
///
/// Thread: main thread.  Blocks as long as the cleanups do.
/// Memory ordering: each take_all() is acquire (seed) / seq_cst (reference).
/// Errors: none.  Returns 0 without doing anything when called re-entrantly
/// from a cleanup or when the host is dead.
/// Source: cuda-python PR #2371.
/// @param queue the queue to drain
/// @return the number of cleanups run
inline std::size_t drain_all(Queue& queue) noexcept {
  if (queue.draining() || !queue.host_alive()) {
    return 0;
  }
  queue.set_draining(true);
  std::size_t n = 0;
  for (;;) {
    DeferredCleanupItem* list = queue.take_all();
    if (list == nullptr) {
      break;
    }
    n += run_list(queue, list);
  }
  queue.set_draining(false);
  return n;
}

/// The pending-call function: clear scheduled_, then drain.
///
/// Thread: main thread, called by the host's pending-call machinery with
/// the GIL held (CPython: make_pending_calls / _PyEval_MakePendingCalls).
/// Blocks as long as the cleanups do.
/// Memory ordering: clear_schedule() then take_all(), both seq_cst in the
/// reference: the consumer half of the store-buffering pair.  A producer
/// whose push is not seen by our take must see our clear and schedule anew.
/// Errors: none; always returns 0 so that CPython raises nothing in the
/// interrupted Python code.  After the host died it returns 0 and touches
/// nothing (counted in stats.pending_calls_ignored).
/// Source: Python/ceval_gil.c make_pending_calls (v3.12.0): a non-zero
/// return means "an exception is set"; cuda-python PR #2371.
/// @param arg the Queue* given to add_pending_call
/// @return 0, always
inline int pending_call(void* arg) noexcept {
  Queue& queue = *static_cast<Queue*>(arg);
  if (!queue.host_alive()) {
    queue.stats.pending_calls_ignored.fetch_add(1, std::memory_order_relaxed);  // statistics only
    return 0;
  }
  queue.stats.drain_cycles.fetch_add(1, std::memory_order_relaxed);  // statistics only
  queue.clear_schedule();  // before the take: consumer half of the store-buffering pair
  drain_all(queue);
  return 0;
}
// [end-doc:drain]

/// What an entry point did.
///
/// Thread: returned to the caller of drain_at_entry().
/// Memory ordering: n/a (a value).  Errors: n/a.
/// Source: issue 3 Part 2c.
enum class EntryAction : std::uint8_t {
  nothing,      ///< queue empty, host dead, or already draining
  drained,      ///< reference on the main thread: drained directly
  rescheduled,  ///< retried scheduling (off the main thread, or the seed)
};

// [doc:entry]
/// Called at every API entry point: bounded cleanup delay (gh-95820).
///
/// Thread: any.  On the main thread of a reference queue it drains directly
/// (blocking as long as the cleanups do); elsewhere, and always for the seed
/// variant, it only retries scheduling.
/// Memory ordering: the emptiness test is a relaxed snapshot: an item pushed
/// after it is its producer's to schedule.  The drain itself uses take_all().
/// Errors: none thrown.
/// Source: gh-95820 (pending calls from a thread without a thread state
/// starve while the main thread runs pure Python, 3.10-3.12); issue 3
/// Part 2c.
/// @param queue the queue
/// @return what was done
inline EntryAction drain_at_entry(Queue& queue) noexcept {
  if (queue.empty_snapshot() || !queue.host_alive()) {
    return EntryAction::nothing;
  }
  if (queue.variant() == Variant::reference && queue.host().is_main_thread()) {
    if (queue.draining()) {
      return EntryAction::nothing;
    }
    queue.stats.direct_drains.fetch_add(1, std::memory_order_relaxed);  // statistics only
    drain_all(queue);  // gh-95820: do not wait for a pending call that may starve
    return EntryAction::drained;
  }
  retry_schedule(queue, &pending_call);
  return EntryAction::rescheduled;
}
// [end-doc:entry]

}  // namespace deferred_cleanup
