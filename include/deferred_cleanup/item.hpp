// SPDX-License-Identifier: Apache-2.0
// item.hpp: the unit of deferred work.
//
// A DeferredCleanupItem is one payload waiting to be released on the CPython
// main thread.  It is *intrusive*: the `next` link lives inside the item, so
// pushing it onto the MPSC queue needs no allocation.  That matters because
// the push happens where allocating is not allowed or not wise: inside a
// CUDA user object's destructor, which CUDA runs on an internal driver thread
// where we may not allocate, block, call CUDA or touch a Python object
// (cuda-python PR #2371, cuda-core 1.2.0), in a thread pool's completion, in
// another runtime's garbage collector.
//
// Item<T> is the typed form: a T and its DeferredCleanupItem in one
// allocation, made by make_item<T>(...) on any thread ahead of time, handed
// off as a std::unique_ptr (callback.hpp, hand_off); its cleanup deletes it,
// so T's destructor runs on the main thread, exactly once.
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

#include <memory>
#include <type_traits>
#include <utility>

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

// [doc:typed-item]
/// A T waiting for the main thread, with its intrusive node: ownership in the
/// type.  Made by make_item(); handed off with hand_off(q,
/// std::unique_ptr<Item<T>>) (callback.hpp), after which the queue owns it
/// and the drain's cleanup deletes it: T's destructor runs on the main
/// thread, exactly once.  Never handed off, it is freed where its
/// std::unique_ptr dies (or on the main thread by cleanup_now()).
///
/// Thread: made on any thread (it allocates there, ahead of the hand-off);
/// value() on the thread that owns it; destroyed on the main thread once
/// handed off.
/// Memory ordering: everything written to the value before hand_off()
/// happens-before T's destructor in the drain (the queue's push/take pair).
/// Errors: T's destructor must not throw (checked at compile time); a
/// throwing constructor throws from make_item(), before any hand-off.
/// Source: this project (the deferred cleanup of cuda-python PR #2371 with
/// the payload's type known).
template <class T>
class Item {
  static_assert(std::is_nothrow_destructible_v<T>,
                "an Item's value is destroyed inside a drain: its destructor must not throw");

 public:
  /// Construct the value in place from `args`.
  ///
  /// Thread: any.  Memory ordering: plain.  Errors: what T's constructor
  /// throws.  Source: this project.
  /// @param args T's constructor arguments
  template <class... Args>
  explicit Item(Args&&... args) : value_(std::forward<Args>(args)...) {
    init_item(node_, this, &destroy);
  }

  Item(const Item&) = delete;
  Item& operator=(const Item&) = delete;

  /// The value.
  ///
  /// Thread: the owner.  Memory ordering: plain.  Errors: none.
  /// Source: this project.
  /// @return the value
  T& value() noexcept { return value_; }

  /// The value (read only).
  ///
  /// Thread: the owner.  Memory ordering: plain.  Errors: none.
  /// Source: this project.
  /// @return the value
  const T& value() const noexcept { return value_; }

  /// The intrusive node that hand_off() pushes; its cleanup deletes this
  /// Item.  For hand_off(q, item.release()->node()) where a raw node is
  /// needed (a C callback's argument); the unique_ptr overload does it.
  ///
  /// Thread: the owner.  Memory ordering: plain.  Errors: none.
  /// Source: this project.
  /// @return the node, valid until the cleanup ran
  DeferredCleanupItem* node() noexcept { return &node_; }

 private:
  static void destroy(void* self) noexcept { delete static_cast<Item*>(self); }

  DeferredCleanupItem node_;
  T value_;
};

/// Make a typed item: allocate an Item<T> and construct its value.
///
/// Thread: any; allocates (call it ahead of the hand-off, never where
/// allocating is forbidden).  Memory ordering: plain.
/// Errors: std::bad_alloc, or what T's constructor throws.
/// Source: this project (as std::make_unique).
/// @param args T's constructor arguments
/// @return the item, owned by the caller until hand_off()
template <class T, class... Args>
std::unique_ptr<Item<T>> make_item(Args&&... args) {
  return std::make_unique<Item<T>>(std::forward<Args>(args)...);
}
// [end-doc:typed-item]

}  // namespace deferred_cleanup
