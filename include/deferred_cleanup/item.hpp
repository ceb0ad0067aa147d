// item.hpp: the unit of deferred work.
//
// A DeferredCleanupItem is one payload waiting to be released on the CPython
// main thread.  It is *intrusive*: the `next` link lives inside the item, so
// pushing it onto the MPSC queue needs no allocation.  That matters because
// the push happens inside a user object's destructor, which CUDA runs on an
// internal driver thread where we may not allocate, block, call CUDA or touch
// a Python object (cuda-python PR #2371, cuda-core 1.2.0).
//
// Life of an item:
//
//   main thread:   allocate item, fill payload + cleanup, hand its address to
//                  the driver as the user object's destructor argument;
//   driver thread: the user object dies -> the destructor pushes the item
//                  (callback.hpp), nothing else is written to it;
//   main thread:   the drain (drain.hpp) takes the item, reads `next`, then
//                  calls cleanup(payload) exactly once.  From that call on the
//                  item belongs to the cleanup function, which usually frees
//                  the allocation that embeds the item.
//
// If creating the user object fails, the driver never sees the item and the
// main thread runs the cleanup directly (cleanup_directly in callback.hpp):
// exactly once either way.
//
// The item has no atomics of its own.  `next` is a plain field: the producer
// writes it before the CAS that publishes the item (release or stronger) and
// the consumer reads it after the exchange that takes the list (acquire or
// stronger), so every access to `next` is ordered by happens-before.
#pragma once

namespace deferred_cleanup {

/// Function that releases one payload.
///
/// Thread: runs on the CPython main thread, inside a drain, with the GIL held
/// by the host (the CPython host runs drains from a pending call or from an
/// API entry point).  It may block only as long as releasing the payload
/// blocks (e.g. a Python finalizer).
/// Memory ordering: everything the main thread wrote before creating the item,
/// and everything the driver thread wrote before pushing it, happens-before
/// the call (queue.hpp explains the release/acquire pair).
/// Errors: must not throw (the type is noexcept).  A Python exception raised
/// while releasing the payload is reported by the host through
/// `sys.unraisablehook` and never propagates into the drain.
/// Source: cuda-python PR #2371 (cuda.core's deferred release of graph
/// user-object payloads).
using CleanupFn = void (*)(void* payload) noexcept;

// [doc:item]
/// One payload waiting to be released on the main thread; an intrusive node of
/// the MPSC queue.
///
/// Thread: created and filled on the main thread before the driver sees the
/// user object; pushed once from a driver thread; taken and run once on the
/// main thread.
/// Memory ordering: plain fields, published by the queue's push CAS (release
/// or stronger) and acquired by the drain's exchange (acquire or stronger).
/// Errors: none; the item is a passive record.
/// Source: cuda-python PR #2371 (intrusive item preallocated per user object).
struct DeferredCleanupItem {
  /// Opaque pointer handed to `cleanup`; often the allocation that embeds
  /// this item.
  void* payload = nullptr;
  /// Releases `payload`; called exactly once, on the main thread.
  CleanupFn cleanup = nullptr;
  /// Intrusive link, written only by the pushing producer before publication
  /// and read only by the draining consumer after taking the list.
  DeferredCleanupItem* next = nullptr;
};
// [end-doc:item]

/// Fill an item before the driver sees it.
///
/// Thread: the thread that owns the item before publication (the main thread
/// in the CPython host).  Never blocks.
/// Memory ordering: plain stores; published later by Queue::push.
/// Errors: none.
/// Source: cuda-python PR #2371.
/// @param item the item to initialise
/// @param payload pointer passed to `cleanup`
/// @param cleanup function that releases `payload`, exactly once
inline void init_item(DeferredCleanupItem& item, void* payload, CleanupFn cleanup) noexcept {
  item.payload = payload;
  item.cleanup = cleanup;
  item.next = nullptr;
}

/// Run an item's cleanup.  After this returns the item may already be freed;
/// callers read `next` before calling.
///
/// Thread: main thread, inside a drain or a direct cleanup.  Blocks as long as
/// the cleanup does.
/// Memory ordering: none of its own.
/// Errors: none (cleanups are noexcept).
/// Source: cuda-python PR #2371.
/// @param item the item whose cleanup runs; must not be used afterwards
inline void run_cleanup(DeferredCleanupItem* item) noexcept { item->cleanup(item->payload); }

}  // namespace deferred_cleanup
