// SPDX-License-Identifier: Apache-2.0
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
//   2. make sure a pending call is outstanding (scheduling.hpp).  In the
//      reference that is one seq_cst load of `scheduled_` when a call is
//      already claimed, the common case under load (the fast path: no gate,
//      no RMW); only otherwise the gate and the claim.  The comparison
//      variants call schedule() every time, as cuda-core 1.2.0 does.
//
// It never calls the driver, never allocates, never waits (apart from
// CPython's brief pending-call lock inside Py_AddPendingCall) and uses no
// Python API other than Py_AddPendingCall (the cuda-core-1.2 variant also
// calls Py_IsInitialized and the finalizing test, as shipped).  It always
// pushes, even after shutdown began: a late item gets no pending call; a
// main-thread drain before CPython finalizes still cleans it, and after that
// the backstop counts it as leaked (queue.hpp, the contract table).
//
// Exactly once.  If the user object cannot be created the driver never calls
// the destructor, so the main thread cleans the item directly with
// cleanup_directly().  If creation succeeded, only the destructor may lead to
// the cleanup.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "deferred_cleanup/drain.hpp"
#include "deferred_cleanup/item.hpp"
#include "deferred_cleanup/queue.hpp"
#include "deferred_cleanup/rearm.hpp"
#include "deferred_cleanup/scheduling.hpp"
#include "deferred_cleanup/visibility.hpp"

namespace deferred_cleanup {

/// Whether this fast-path hit should look at the age of the outstanding
/// claim (rearm.hpp): about one item in 2^Log2, chosen by a hash of the
/// item's address (multiply, xor-shift, multiply; the top Log2 bits zero).
/// Every caller names the rate: hand_off() uses the policy's
/// (ReferencePolicy::rearm_sample_log2, policy.hpp, which states it).  No
/// counter and no thread_local: a shared counter would add an RMW to the fast
/// path, and a thread_local in a dlopen'ed module may allocate on first use
/// in a thread (glibc's __tls_get_addr), which the destructor thread must
/// not do.  A single multiply (Fibonacci hashing) is not enough: items
/// allocated at a regular stride form an arithmetic sequence, which one
/// multiply maps to evenly spaced values, and at some strides their top bits
/// cycle through a few values that may all miss (tests/cpp/core_tests.cpp,
/// SampleStaleCheck, counts such bursts with no sampled item).  The
/// xor-shift between two multiplies breaks that structure, so a burst at any
/// stride is sampled about as often as random addresses would be (a burst of
/// n items holds none with probability about (1 - 2^-Log2)^n).
///
/// Thread: any.  Never blocks.  Memory ordering: none.  Errors: none.
/// Source: this project; Knuth, TAOCP vol. 3, 6.4 (multiplicative hashing);
/// the multiply/xor-shift mix: Steele, Lea and Flood, "Fast splittable
/// pseudorandom number generators", OOPSLA 2014 (SplitMix64's finalizer).
/// @tparam Log2 the sampling: one item in 2^Log2 (no default: hand_off()
///         passes P::rearm_sample_log2)
/// @param item the item just pushed
/// @return true for about one item in 2^Log2
template <unsigned Log2>
inline bool sample_stale_check(const DeferredCleanupItem* item) noexcept {
  static_assert(Log2 >= 1 && Log2 <= 32, "a sampling between one in 2 and one in 2^32");
  constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // 2^64 / golden ratio, odd
  std::uint64_t x = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(item)) * kGolden;
  x ^= x >> 29;  // fold the high bits, which depend on every address bit, into the low ones
  x *= kGolden;
  return (x >> (64 - Log2)) == 0;
}

// [doc:callback]
/// Hand one preallocated item to the main thread: push it, then make sure a
/// pending call is outstanding.  The generic entry point: a thread-pool
/// completion, a driver callback, another runtime's garbage collector, and
/// the body of a CUDA user object's destructor (on_user_object_destroyed).
///
/// Thread: any, also one with no Python thread state and one that runs
/// during or after finalization.  Never allocates, never waits except inside
/// the host's add_pending_call.  Touches no statistics counter on the fast
/// path.
/// Memory ordering: push() (P::push) publishes the item.  Reference: push and
/// check_scheduled() are seq_cst, so with the drain's seq_cst clear-then-take
/// either the check sees the clear (and this producer schedules) or the take
/// sees the push: no lost wakeup.  Comparison variants: schedule() with the
/// shipped orders.
/// Errors: none.  A refused pending call leaves the item queued for a retry.
/// After shutdown the item stays queued without a pending call: a main-thread
/// drain before CPython finalizes cleans it, otherwise it is counted as leaked.
/// Source: cuda-python PR #2371; CUDA Driver API, cuUserObjectCreate
/// (CU_USER_OBJECT_NO_DESTRUCTOR_SYNC).
/// @param q the queue
/// @param item the preallocated item; not in any list; from now on it belongs
///        to the queue until its cleanup runs
/// @return the scheduling result (for statistics and tests)
template <class P>
ScheduleResult hand_off(BasicQueue<P>& q, DeferredCleanupItem* item) noexcept {
  q.push(item);  // step 1: publish the item (wakeup.push)
  if constexpr (P::fast_path) {
    if (q.check_scheduled()) {  // step 2, fast path: a call is claimed (wakeup.check)
      if constexpr (P::rearm) {
        if (sample_stale_check<P::rearm_sample_log2>(item)) {
          return rearm_if_stale(q);  // re-arming: now and then, is the claim stale?
        }
      }
      return ScheduleResult::already_scheduled;
    }
  }
  return schedule(q);  // step 2, slow path
}
// [end-doc:callback]

/// The body of a CUDA user object's destructor: hand_off() under the name
/// the CUDA driver's documentation suggests.
///
/// Thread: any, as hand_off().  Blocking: as hand_off().
/// Memory ordering: as hand_off().
/// Errors: as hand_off().
/// Source: CUDA Driver API, cuUserObjectCreate; cuda-python PR #2371.
/// @param q the queue
/// @param item the item preallocated for this user object
/// @return hand_off(q, item)
template <class P>
ScheduleResult on_user_object_destroyed(BasicQueue<P>& q, DeferredCleanupItem* item) noexcept {
  return hand_off(q, item);
}

/// The queue slot of policy P: one per extension (per shared object, hidden
/// visibility: visibility.hpp), never shared with another extension that uses
/// these headers.  Published once, never freed.
///
/// Thread: any.  Never blocks.
/// Memory ordering: written by publish_queue() (release CAS), read by
/// published_queue() (acquire).
/// Errors: none.
/// Source: cuda-python PR #2371 (queue published once at module import);
/// visibility.hpp (why hidden).
template <class P>
DEFERRED_CLEANUP_LOCAL inline std::atomic<BasicQueue<P>*> g_published_queue{nullptr};

/// Publish the process-wide queue of policy P, once.
///
/// Thread: any (the CPython host calls it at module import).  Never blocks.
/// Memory ordering: the successful CAS is acq_rel: release publishes the
/// queue's initialisation to every published_queue() reader; acquire on
/// failure makes the winner's queue fully visible to a losing caller.
/// Errors: none; a losing caller gets the winner and should leak its
/// candidate.
/// Source: cuda-python PR #2371 (published once, atomically, at import).
/// @param candidate a freshly constructed queue that is never freed
/// @return the published queue (candidate if this call won)
template <class P>
BasicQueue<P>* publish_queue(BasicQueue<P>* candidate) noexcept {
  BasicQueue<P>* expected = nullptr;
  // Release: synchronizes with published_queue()'s acquire load; acquire on
  // failure to see the winner's fields.
  if (g_published_queue<P>.compare_exchange_strong(expected, candidate, std::memory_order_acq_rel,
                                                   std::memory_order_acquire)) {
    return candidate;
  }
  return expected;
}

/// The published queue of policy P, or nullptr before publication.
///
/// Thread: any, including driver threads.  Never blocks.
/// Memory ordering: acquire; pairs with publish_queue()'s release CAS.
/// Errors: none.
/// Source: cuda-python PR #2371.
/// @return the queue, or nullptr if none was published yet
template <class P>
BasicQueue<P>* published_queue() noexcept {
  // Pairs with publish_queue().
  return g_published_queue<P>.load(std::memory_order_acquire);
}

/// Hand off through the published queue: hand_off() in the shape of a C
/// callback, `void (*)(void*)` with the item as its argument, for a callback
/// API that passes one pointer (CUDA's CUhostFn, a C library's completion
/// callback).  Use hand_off() where the queue is at hand.
///
/// Thread: any.  Never allocates or waits (see hand_off).
/// Memory ordering: reads the published queue with acquire; then as
/// hand_off.
/// Errors: none.  If no queue of P was published in this extension the item
/// is dropped: leaked, never touched.
/// Source: CUDA Driver API, CUhostFn; cuda-python PR #2371.
/// @param item_ptr the DeferredCleanupItem* registered with the callback
template <class P>
void hand_off_published(void* item_ptr) noexcept {
  if (BasicQueue<P>* q = published_queue<P>()) {
    hand_off(*q, static_cast<DeferredCleanupItem*>(item_ptr));
  }
}

/// A CUDA user object's destructor: hand_off_published() under the CUDA
/// name, in the shape the CUDA driver (CUhostFn) and the simulated driver
/// call.
///
/// Thread: any, as hand_off_published().  Blocking: as hand_off_published().
/// Memory ordering: as hand_off_published().
/// Errors: as hand_off_published().
/// Source: CUDA Driver API, CUhostFn and cuUserObjectCreate; cuda-python PR
/// #2371.
/// @param item_ptr the DeferredCleanupItem* registered with the user object
template <class P>
void user_object_destructor(void* item_ptr) noexcept {
  hand_off_published<P>(item_ptr);
}

/// Clean an item that was never handed off, on the calling thread: the
/// exactly-once path when the hand-off cannot happen (the user object, the
/// task, the callback registration was never created).
///
/// Thread: the main thread (its cleanup runs here; off the main thread hand
/// the item off instead, so that its cleanup runs on the main thread);
/// blocks as long as the cleanup does.
/// Memory ordering: none needed; the item was never published.
/// Errors: none.
/// Source: this project (exactly once when creation fails: the driver never
/// calls the destructor of a user object it did not create; CUDA Driver API,
/// cuUserObjectCreate).
/// @param q the queue whose statistics are updated (direct_cleanups, cleaned)
/// @param item the never-handed-off item; must not be used afterwards
template <class P>
void cleanup_now(BasicQueue<P>& q, DeferredCleanupItem* item) noexcept {
  run_cleanup(item);
  q.stats.direct_cleanups.fetch_add(1, std::memory_order_relaxed);  // statistics only
  q.stats.cleaned.fetch_add(1, std::memory_order_relaxed);          // statistics only
}

/// Clean an item whose user object was never created: cleanup_now() under
/// the CUDA name.
///
/// Thread: the main thread, as cleanup_now().  Blocking: as cleanup_now().
/// Memory ordering: as cleanup_now().
/// Errors: as cleanup_now().
/// Source: CUDA Driver API, cuUserObjectCreate.
/// @param q the queue whose statistics are updated
/// @param item the never-published item; must not be used afterwards
template <class P>
void cleanup_directly(BasicQueue<P>& q, DeferredCleanupItem* item) noexcept {
  cleanup_now(q, item);
}

/// Hand a typed item to the main thread; its ownership passes to the queue,
/// and the drain's cleanup deletes it (running T's destructor on the main
/// thread).
///
/// Thread: any (as hand_off).  Allocates nothing, frees nothing: moving the
/// pointer in is a copy of one address.
/// Memory ordering: as hand_off.
/// Errors: none.  A null item is ignored (ScheduleResult::empty).
/// Source: this project (item.hpp, Item).
/// @param q the queue
/// @param item the typed item, made earlier with make_item()
/// @return the scheduling result of hand_off()
template <class P, class T>
ScheduleResult hand_off(BasicQueue<P>& q, std::unique_ptr<Item<T>> item) noexcept {
  if (!item) return ScheduleResult::empty;
  return hand_off(q, item.release()->node());
}

/// Clean a typed item that was never handed off, on the calling thread
/// (cleanup_now for an Item): T's destructor runs here and the item is freed.
///
/// Thread: the main thread; blocks as long as T's destructor does.
/// Memory ordering: none needed.  Errors: none; a null item is ignored.
/// Source: this project (item.hpp, Item).
/// @param q the queue whose statistics are updated
/// @param item the typed item
template <class P, class T>
void cleanup_now(BasicQueue<P>& q, std::unique_ptr<Item<T>> item) noexcept {
  if (item) cleanup_now(q, item.release()->node());
}

}  // namespace deferred_cleanup
