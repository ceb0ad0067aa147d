// SPDX-License-Identifier: Apache-2.0
//
// host.hpp: the CPython host of deferred-cleanup, C++ API.
//
// The library (src/cpython/*.cpp, CMake target deferred_cleanup::cpython) is
// compiled into your extension, its sources alone with -fvisibility=hidden
// (yours keep their visibility), so two extensions that both use it share no
// symbol and each has its own host.  It uses the
// plain CPython C API: pybind11 and nanobind are optional.  The C API
// (deferred_cleanup.h) is the same host; this header adds C++ spellings.
#pragma once

#include <cstdint>
#include <memory>

#include "deferred_cleanup/cpython/deferred_cleanup.h"

namespace deferred_cleanup::cpython {

using Options = dc_host_options;
using Counters = dc_counters;
using Item = dc_item;

// [doc:cpython-host]
/// The CPython host: one per extension, created at import, never freed.
///
/// What it does for you (its obligations toward CPython), each tested:
///  [x] pending-call trampoline: hand_off() queues the item and, when no call
///      is outstanding, Py_AddPendingCall(trampoline) (Python/ceval_gil.c,
///      v3.12.0); a lost call is re-armed (rearm.hpp);
///  [x] finalizing -> host dead: once Py_IsFinalizing() (3.13+;
///      _Py_IsFinalizing 3.10-3.12) is seen by a pending call or an entry
///      point, no cleanup runs any more (Python objects of a dying
///      interpreter);
///  [x] the error and interrupt rule: a cleanup's exception goes to
///      sys.unraisablehook, except the first KeyboardInterrupt/SystemExit of
///      a drain, which stops the drain early (the rest back on the queue in
///      order, a pending call re-armed) and is raised where the drain was
///      entered; in CPython's exit-time flush it is held for the exit
///      sequence (deferred_cleanup.h, dc_cleanup_fn);
///  [x] entry-point drains (gh-95820): entry() on the main thread drains;
///  [x] exit step 0: in the atexit phase, drain while the user's
///      outstanding() says work is due, bounded by exit_wait_ns;
///  [x] the atexit-phase exit sequence (close, wait out producers in the
///      gate, final drain), registered from C.  On 3.10-3.13 it runs after
///      every atexit handler of yours, whenever you registered it: a
///      threading._register_atexit callback (Lib/threading.py v3.10.0,
///      _shutdown, which Py_FinalizeEx runs before the atexit phase) adds a
///      hook that runs the other handlers first, then the sequence (if an
///      exception such as a Ctrl-C ends _shutdown before that callback, a
///      fallback handler registered at Host::get() runs it instead).  On
///      3.14+ it is an ordinary atexit handler registered at Host::get(), so
///      (atexit runs last-registered first) your handlers registered after
///      Host::get() run before it and those registered before run after it
///      (docs/caveats.rst, "Where the hook stands");
///  [x] the Py_AtExit backstop: host dead, wait (bounded) for producers
///      inside Py_AddPendingCall, count leaked items; no Python API;
///  [x] fork(): os.register_at_fork(after_in_child=...) resets the host's
///      thread-bound state and schedules a drain of inherited items.
/// What you must do (your obligations):
///  [ ] call Host::get() (dc_host_get) from your module's init, on the main
///      thread of the main interpreter;
///  [ ] preallocate an item (dc_item_new / make_item) while you may still
///      allocate, before the work that completes it starts;
///  [ ] hand each item off exactly once (or discard it); never touch it after;
///  [ ] call entry() first in every function of your extension, and
///      propagate its -1 (return NULL);
///  [ ] keep the cleanup short, on the GIL; it must not free the item;
///  [ ] if work may complete late, give Options::outstanding so the exit
///      sequence waits for it.
///
/// Thread: see each member.  Source: see deferred_cleanup.h.
class Host {
 public:
  /// dc_host_get(): create (first call) or return this extension's host.
  /// Thread: main thread of the main interpreter, GIL held.  Errors: nullptr
  /// with an exception set.
  static Host* get(const Options& opts = {}) noexcept {
    return reinterpret_cast<Host*>(dc_host_get(&opts));
  }
  /// dc_hand_off(): any thread, also after finalization; never blocks,
  /// allocates nothing; seq_cst push.  Returns 0, or -1 for a null item
  /// (nothing queued, no exception set).
  int hand_off(Item* item) noexcept { return dc_hand_off(c(), item); }
  /// dc_entry(): any thread holding the GIL; drains on the main thread.
  /// Returns 0, or -1 with a cleanup's KeyboardInterrupt/SystemExit set.
  int entry() noexcept { return dc_entry(c()); }
  /// dc_drain_now(): main thread, GIL held; cleanups run, or -1 with an
  /// exception set.
  std::int64_t drain_now() noexcept { return dc_drain_now(c()); }
  /// dc_get_counters(): any thread; relaxed snapshot.
  Counters counters() const noexcept {
    Counters out{};
    dc_get_counters(reinterpret_cast<const dc_host*>(this), &out);
    return out;
  }

 private:
  Host() = delete;
  dc_host* c() noexcept { return reinterpret_cast<dc_host*>(this); }
};
// [end-doc:cpython-host]

/// A typed item: its cleanup deletes `owned` (main thread, GIL held, through
/// T's destructor).  Thread: any.  Blocking: allocation only.  Memory
/// ordering: n/a until handed off.  Errors: nullptr when out of memory
/// (`owned` is then still the caller's: it is released from the unique_ptr
/// only on success).  Source: this project.
template <class T>
Item* make_item(std::unique_ptr<T>& owned) noexcept {
  Item* it = dc_item_new([](void* p) { delete static_cast<T*>(p); }, owned.get());
  if (it != nullptr) owned.release();
  return it;
}

/// dc_item_payload(): the payload `item` was made with (nullptr for a null
/// item).  Thread: any, while the item is the caller's (before hand_off()
/// or dc_item_discard()).  Never blocks.  Memory ordering: a plain read.
/// Errors: none.  Source: this project.
inline void* payload(const Item* item) noexcept { return dc_item_payload(item); }

}  // namespace deferred_cleanup::cpython
