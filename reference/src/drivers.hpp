// SPDX-License-Identifier: Apache-2.0
// drivers.hpp: the two implementations of deferred_cleanup::Driver.
//
// Private to reference/src (the bindings and the two driver .cpp files); the
// public seam is include/deferred_cleanup/driver.hpp.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "deferred_cleanup/driver.hpp"

namespace deferred_cleanup {

/// The simulated driver: reference-counted user objects whose destructors
/// run on a dedicated native std::thread (no Python thread state), as CUDA's
/// do, plus test controls.
///
/// Thread: members are called from the main thread; destructors run on the
/// driver's own thread or, for a burst, on `threads` burst threads that start
/// together at a start gate, or (set_synchronous) on the thread that drops
/// the last reference, inside that call, with its GIL and `mu_` held.
/// Memory ordering: the work list is guarded by `mu_`; a destructor call
/// happens-after the destroy() that released the last reference (mutex
/// release/acquire, thread start; program order when synchronous).
/// Errors: DriverError for unknown or destroyed graphs; injected creation
/// failures are reported through AttachResult.
/// Source: CUDA Driver API semantics of cuUserObjectCreate /
/// cuGraphRetainUserObject / cuGraphDestroy (CUDA 12), simulated.
class SimulatedDriver final : public Driver {
 public:
  SimulatedDriver();
  ~SimulatedDriver() override;

  const char* name() const noexcept override { return "simulated"; }
  GraphHandle create_graph() override;
  AttachResult attach(GraphHandle graph, DestructorFn destructor, void* arg) override;
  void instantiate(GraphHandle graph) override;
  void destroy(GraphHandle graph) override;

  /// Hold destructor calls back (true) or deliver them as they come (false,
  /// the default).  Turning holding off does not release what is held.
  void set_hold(bool hold);
  /// Run each destructor on the thread that drops the last reference,
  /// inside that driver call (true), as cuGraphDestroy may (cuda-python
  /// #2042), or on the worker thread (false, the default).  Holding, when on,
  /// takes precedence.  Thread: any.  Blocks: takes mu_.  Memory ordering:
  /// mu_.  Errors: none.  The destructor then runs with mu_ held, so it must
  /// not call the driver (the destructor callback never does) nor block (do
  /// not combine it with the gate hold test hook).  A fork() child keeps the
  /// setting.  Source: notes/gpu-run.md (cuGraphDestroy ran destructor
  /// callbacks on the calling thread; docs/caveats.rst has the count).
  void set_synchronous(bool on);
  /// Pause the worker thread (true): due destructor calls stay due, so
  /// wait_idle() waits its whole timeout; false lets it go on.  Holding and
  /// bursts are unaffected.  Thread: any.  Blocks: takes mu_.  Memory
  /// ordering: mu_.  Errors: none.  The driver's destructor unpauses it; a
  /// fork() child keeps the setting.  Source: this project (a test control:
  /// keeps a thread inside wait_idle()).
  void set_paused(bool on);
  /// Number of destructor calls currently held back.
  std::size_t held() const;
  /// Release every held destructor call in one burst from `threads` threads
  /// that start together at a start gate.  Returns at once; wait_idle() waits.
  /// Throws DriverError when a thread cannot be started (see the binding).
  /// @return the number of calls released
  std::size_t release(int threads);
  /// Wait until every due destructor call (not held) has returned.
  /// @return true if idle before the timeout
  bool wait_idle(std::chrono::milliseconds timeout);
  /// The next `n` attach() calls fail before creating the user object.
  void fail_next_creates(int n);
  /// The next `n` attach() calls create the user object, then fail to hand it
  /// to the graph (the destructor then fires at once).
  void fail_next_retains(int n);
  /// Test hook: after `after` more successful starts, the next `n` native
  /// threads this driver starts fail with std::system_error (EAGAIN), as
  /// when the system refuses a thread.
  void fail_next_thread_starts(int n, int after = 0);
  /// Test hook: the next `n` error messages attach() builds throw
  /// std::bad_alloc while being built (before any ownership changes hands).
  void fail_next_message_allocs(int n);
  /// Destructor calls lost in a fork() child: they were running on a thread
  /// that does not exist in the child.
  std::uint64_t lost_in_fork() const;
  /// Make the driver usable in a fork() child: new locks, no inherited
  /// thread handles (never joined: the threads do not exist here), a new
  /// worker thread for the calls still due.
  ///
  /// Thread: the forking thread, in the child, before any other thread
  /// exists.  Blocks: starts a thread.
  /// Memory ordering: plain; the child has one thread.
  /// Errors: none thrown; if the worker cannot be started, due calls stay
  /// due (counted as not delivered).
  /// Source: POSIX fork(2): only the calling thread is duplicated.
  /// @return destructor calls lost by this fork (they were running on a
  ///         thread the child does not have)
  std::uint64_t after_fork_child() noexcept;
  /// steady_clock time (ns) at which the last burst's threads were let go,
  /// or 0.
  std::int64_t last_release_ns() const {
    return last_release_ns_.load(
        std::memory_order_acquire);  // pairs with the burst's release store
  }
  /// destroy() calls running now, on any thread: with one thread calling
  /// destroy(), a finalizer that reads 1 ran inside it (set_synchronous).
  /// Thread: any.  Blocks: no.  Memory ordering: relaxed; the finalizer that
  /// reads it runs on the thread that made the increment, if inside
  /// destroy() (program order).  Errors: none.  Reset to 0 in a fork()
  /// child.  Source: this project (a test device).
  int destroys_running() const {
    return destroys_running_.load(std::memory_order_relaxed);  // see above
  }
  /// Destructor calls delivered so far.
  std::uint64_t delivered() const {
    return delivered_.load(
        std::memory_order_acquire);  // pairs with the release increment after each destructor
  }

 private:
  struct UserObject {
    std::atomic<int> refs{1};
    DestructorFn fn = nullptr;
    void* arg = nullptr;
  };
  struct Graph {
    std::vector<UserObject*> objects;
    bool instantiated = false;
  };
  void unref(UserObject* uo);  // requires mu_ held
  void worker();
  void join_bursts();
  std::thread start_thread(std::function<void()> fn);  // honours fail_thread_starts_
  std::string message(const char* text);               // honours fail_message_allocs_

  mutable std::mutex mu_;
  std::condition_variable cv_;       // work for the worker, or stop
  std::condition_variable idle_cv_;  // outstanding_ reached 0
  std::unordered_map<GraphHandle, Graph> graphs_;
  GraphHandle next_graph_ = 1;
  std::deque<UserObject*> due_;  // destructor calls for the worker
  std::vector<UserObject*> held_;
  bool hold_ = false;
  bool synchronous_ = false;  // deliver inside the driver call (set_synchronous)
  bool paused_ = false;       // the worker leaves due calls due (set_paused)
  bool stop_ = false;
  std::size_t outstanding_ = 0;  // due or running, not held
  int fail_creates_ = 0;
  int fail_retains_ = 0;
  std::atomic<int> fail_thread_starts_{0};
  std::atomic<int> succeed_thread_starts_{0};  // before fail_thread_starts_ applies
  int fail_message_allocs_ = 0;
  std::uint64_t lost_in_fork_ = 0;
  std::size_t running_ = 0;  // destructor calls running now (worker + bursts)
  std::vector<std::thread> bursts_;
  std::atomic<std::int64_t> last_release_ns_{0};
  std::atomic<std::uint64_t> delivered_{0};
  std::atomic<int> destroys_running_{0};  // destroy() calls in progress (a test device)
  std::thread worker_;
};

/// Information the CUDA driver reports about itself (for the GPU report).
struct CudaInfo {
  int driver_version = 0;   ///< cuDriverGetVersion
  std::string device_name;  ///< cuDeviceGetName of device 0
};

/// Options of the CUDA driver.
struct CudaOptions {
  /// When > 0, every graph gets one kernel node (one thread) that spins on
  /// %globaltimer for this many microseconds, before its empty node: a launch
  /// keeps the graph's user objects alive at least that long.  0: no kernel.
  std::uint64_t spin_us = 0;
};

/// Create the CUDA driver.  Throws DriverUnavailable naming the reason when
/// cuda.h was missing at build time (or older than CUDA 12.0 with spin_us >
/// 0), libcuda.so.1 cannot be opened, an entry point is missing, cuInit fails
/// or there is no device; DriverError when the spin kernel's PTX does not load.
/// Thread: the main thread.  Blocking: cuInit and the PTX JIT may take a
/// while.  Source: CUDA Driver API cuModuleLoadData, cuGraphAddKernelNode.
std::unique_ptr<Driver> make_cuda_driver(CudaInfo* info, const CudaOptions& options = {});

}  // namespace deferred_cleanup
