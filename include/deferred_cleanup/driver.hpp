// SPDX-License-Identifier: Apache-2.0
// driver.hpp: the seam between the queue and whatever owns user objects.
//
// A driver creates graphs, attaches reference-counted user objects to them
// and destroys them.  When a user object's last reference goes away the
// driver calls its destructor, `destructor(arg)`, on a thread of its own
// choosing: for the deferred-cleanup reference that destructor is
// user_object_destructor (callback.hpp) and `arg` the preallocated item.
//
// Two implementations (reference/src/):
//
//  * cuda       the CUDA driver API, opened at run time with
//               dlopen("libcuda.so.1") and cuGetProcAddress (never linked):
//               cuUserObjectCreate(..., CU_USER_OBJECT_NO_DESTRUCTOR_SYNC),
//               cuGraphRetainUserObject(..., CU_GRAPH_USER_OBJECT_MOVE).
//               CUDA runs destructors on an internal thread.
//  * simulated  the same contract on any machine: reference counts in
//               process memory, destructors on a dedicated std::thread with
//               no Python thread state, plus test controls (hold callbacks,
//               release them in a burst from N threads, inject failures).
//
// Exactly once.  attach() either creates the user object and hands it to the
// graph (the destructor will be called exactly once, later) or reports that
// no user object exists (the destructor will never be called and the caller
// cleans the item directly).  A driver never reports an ambiguous state: if
// creation succeeded but handing it to the graph failed, the driver drops
// its own reference, the destructor fires, and attach reports `released`.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace deferred_cleanup {

/// A user-object destructor: CUDA's CUhostFn shape.
///
/// Thread: called once, on a driver thread (or inside a driver call on the
/// calling thread; cuda-python issue #2042).  Memory ordering: see Driver.
/// Errors: must not throw.
/// Source: CUDA Driver API, CUhostFn / cuUserObjectCreate.
using DestructorFn = void (*)(void* arg);

/// Opaque graph handle; meaning is up to the driver.
///
/// Thread: used on the main thread.  Memory ordering: n/a.  Errors: an
/// unknown handle makes driver calls throw DriverError.
/// Source: this project.
using GraphHandle = std::uint64_t;

/// A driver call failed.
///
/// Thread: thrown on the calling thread.  Memory ordering: n/a.
/// Errors: carries the driver's message
/// (for CUDA: the CUresult name and cuGetErrorString text).
/// Source: this project.
class DriverError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The driver cannot be used on this machine (no libcuda, no GPU, no
/// cuda.h at build time).  The message names the reason.
///
/// Thread: thrown by the driver's constructor.  Memory ordering: n/a.
/// Errors: n/a.
/// Source: this project.
class DriverUnavailable : public DriverError {
 public:
  using DriverError::DriverError;
};

/// Outcome of Driver::attach().
///
/// Thread: returned on the main thread.  Memory ordering: n/a.  Errors: n/a.
/// Source: CUDA Driver API, cuUserObjectCreate (a user object that was not
/// created never has its destructor called), cuGraphRetainUserObject.
enum class AttachStatus : std::uint8_t {
  attached,     ///< the user object lives in the graph; destructor called exactly once later
  not_created,  ///< no user object exists; the destructor will never run: clean directly
  released,     ///< created, then handing it to the graph failed; the destructor ran or will run
};

/// Result of Driver::attach(): status and, on failure, the driver's message.
///
/// Thread: returned on the main thread.  Memory ordering: n/a.  Errors: n/a.
/// Source: CUDA Driver API, cuUserObjectCreate, cuGraphRetainUserObject.
struct AttachResult {
  AttachStatus status = AttachStatus::attached;  ///< what happened
  std::string message;                           ///< why it failed (empty on success)
};

/// The driver interface.
///
/// Thread: every member is called from the main thread of the CPython host
/// (with the GIL released where it may block).  Destructors run on the
/// driver's threads.
/// Memory ordering: a driver must make everything written before attach()
/// visible to the destructor (CUDA's internal synchronization; the simulated
/// driver's mutex and thread start/join).
/// Errors: DriverError from any member except name(); attach() reports
/// creation failures through AttachResult instead, because the caller must
/// know whether the destructor will run.
/// Source: CUDA Driver API (Graph Management, User Objects), CUDA 12.
class Driver {
 public:
  virtual ~Driver() = default;

  /// Short name: "simulated" or "cuda".
  ///
  /// Thread: any.  Memory ordering: n/a.  Errors: none.  Source: this project.
  /// @return the driver's name
  virtual const char* name() const noexcept = 0;

  /// Create an empty graph (the CUDA driver adds one empty node so the graph
  /// can be instantiated).
  ///
  /// Thread: main thread.  May block in the driver.
  /// Memory ordering: n/a.  Errors: DriverError.
  /// Source: cuGraphCreate, cuGraphAddEmptyNode.
  /// @return the new graph's handle
  virtual GraphHandle create_graph() = 0;

  /// Create a user object with `destructor(arg)` and move its only reference
  /// into graph `graph`.
  ///
  /// Thread: main thread.  May block in the driver.
  /// Memory ordering: writes before the call happen-before the destructor.
  /// Errors: reported in the result (see AttachStatus); DriverError only for
  /// an unknown or destroyed graph, before anything was created.
  /// Source: cuUserObjectCreate (CU_USER_OBJECT_NO_DESTRUCTOR_SYNC),
  /// cuGraphRetainUserObject (CU_GRAPH_USER_OBJECT_MOVE).
  /// @param graph a live graph
  /// @param destructor called exactly once when the user object dies
  /// @param arg passed to `destructor`
  /// @return what happened
  virtual AttachResult attach(GraphHandle graph, DestructorFn destructor, void* arg) = 0;

  /// Instantiate (and for CUDA, launch once, without waiting) the graph; the
  /// executable graph holds its own references to the user objects until
  /// destroy() (CUDA: until the launch completed, too).
  ///
  /// Thread: main thread.  May block in the driver.
  /// Memory ordering: n/a.  Errors: DriverError.
  /// Source: cuGraphInstantiate, cuGraphLaunch.
  /// @param graph a live graph
  virtual void instantiate(GraphHandle graph) = 0;

  /// Destroy the graph (and its executable form): drops the graph's
  /// references; destructors of user objects that reach zero run later on a
  /// driver thread.
  ///
  /// Thread: main thread.  May block in the driver.
  /// Memory ordering: n/a.  Errors: DriverError (unknown graph).
  /// Source: cuGraphExecDestroy, cuGraphDestroy.
  /// @param graph a live graph
  virtual void destroy(GraphHandle graph) = 0;
};

}  // namespace deferred_cleanup
