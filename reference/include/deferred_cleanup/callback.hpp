// callback.hpp: what a user object's destructor may do.
//
// CUDA runs a user object's destructor when its last reference goes away:
// with CU_USER_OBJECT_NO_DESTRUCTOR_SYNC, on an internal driver thread, at a
// moment of the driver's choosing.  That thread must not call the CUDA API,
// must not block on work that may wait for CUDA, holds no Python thread
// state and may run during or after interpreter finalization (CUDA Driver API
// reference, cuUserObjectCreate; cuda-python PR #2371).
//
// So the destructor does two things and nothing else:
//
//   1. push its preallocated item onto the queue (a CAS loop, no allocation);
//   2. try to schedule the drain (at most one outstanding Py_AddPendingCall,
//      behind the in-flight gate; scheduling.hpp).
//
// It never calls the driver, never allocates, never waits (apart from
// CPython's brief pending-call lock inside Py_AddPendingCall) and uses no
// Python API other than Py_AddPendingCall.  It always pushes, even after
// shutdown began: a late item is then simply never cleaned, and the backstop
// counts it as leaked.
//
// Exactly once.  If the user object cannot be created the driver never calls
// the destructor, so the main thread cleans the item directly with
// cleanup_directly().  If creation succeeded, only the destructor may lead to
// the cleanup.
#pragma once

#include "deferred_cleanup/drain.hpp"
#include "deferred_cleanup/item.hpp"
#include "deferred_cleanup/queue.hpp"
#include "deferred_cleanup/scheduling.hpp"

namespace deferred_cleanup {

// [doc:callback]
/// The body of a user-object destructor: push, then try to schedule.
///
/// Thread: any, typically a driver thread with no Python thread state; may run
/// during or after finalization.  Never allocates, never waits except inside
/// the host's add_pending_call.
/// Memory ordering: push() is the release (seed) / seq_cst (reference)
/// publication of the item; try_schedule() then claims scheduled_ (acq_rel /
/// seq_cst).  In the reference, push and claim are both seq_cst, which with
/// the drain's clear-then-take forbids the lost wakeup (queue.hpp).
/// Errors: none.  A refused pending call leaves the item queued for a retry.
/// After shutdown the item stays queued and is counted as leaked.
/// Source: cuda-python PR #2371; CUDA Driver API, cuUserObjectCreate
/// (CU_USER_OBJECT_NO_DESTRUCTOR_SYNC).
/// @param queue the published queue
/// @param item the item preallocated for this user object
/// @return the scheduling result (for statistics and tests)
inline ScheduleResult on_user_object_destroyed(Queue& queue, DeferredCleanupItem* item) noexcept {
  queue.stats.enqueued.fetch_add(1, std::memory_order_relaxed);  // statistics only
  queue.push(item);  // step 1: publish the item (wakeup.push)
  const ScheduleResult r = try_schedule(queue, &pending_call);  // step 2: wakeup.check behind the gate
  if (r == ScheduleResult::not_accepting) {
    queue.stats.enqueued_late.fetch_add(1, std::memory_order_relaxed);  // statistics only
  }
  return r;
}
// [end-doc:callback]

/// Destructor trampoline in the shape the CUDA driver (CUhostFn) and the
/// simulated driver call: `void (*)(void*)`, argument = the item.
///
/// Thread: any driver thread.  Never allocates or waits (see
/// on_user_object_destroyed).
/// Memory ordering: reads the published queue with acquire (published_queue);
/// then as on_user_object_destroyed.
/// Errors: none.  If no queue was ever published (impossible once the module
/// imported) the item is dropped: leaked, never cleaned, never touched.
/// Source: CUDA Driver API, CUhostFn; cuda-python PR #2371.
/// @param item_ptr the DeferredCleanupItem* registered with the user object
inline void user_object_destructor(void* item_ptr) noexcept {
  Queue* queue = published_queue();
  if (queue != nullptr) {
    on_user_object_destroyed(*queue, static_cast<DeferredCleanupItem*>(item_ptr));
  }
}

/// Clean an item whose user object was never created.
///
/// Thread: main thread (the thread that allocated the item); blocks as long as
/// the cleanup does.
/// Memory ordering: none needed; the item was never published.
/// Errors: none.
/// Source: issue 3 Part 1.7 (exactly once when creation fails).
/// @param queue the queue whose statistics are updated
/// @param item the never-published item; must not be used afterwards
inline void cleanup_directly(Queue& queue, DeferredCleanupItem* item) noexcept {
  run_cleanup(item);
  queue.stats.direct_cleanups.fetch_add(1, std::memory_order_relaxed);  // statistics only
  queue.stats.cleaned.fetch_add(1, std::memory_order_relaxed);          // statistics only
}

}  // namespace deferred_cleanup
