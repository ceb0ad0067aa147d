// SPDX-License-Identifier: Apache-2.0
// driver_simulated.cpp: the `simulated` driver.
//
// Reference-counted user objects with CUDA's contract (cuUserObjectCreate,
// cuGraphRetainUserObject with CU_GRAPH_USER_OBJECT_MOVE, cuGraphDestroy;
// CUDA Driver API, CUDA 12): a graph owns one reference per attached user
// object, an instantiated graph one more; when the count reaches zero the
// destructor runs later on a native thread of the driver's, a plain
// std::thread that never has a Python thread state (or, with
// set_synchronous, at once on the thread that drops the last reference).
//
// Test controls: holding destructor calls back and releasing them in a burst
// from N threads that start together at a start gate, and injecting
// failures of user-object creation or of the hand-over to the graph.
#include <cerrno>
#include <new>
#include <system_error>

#include "drivers.hpp"

namespace deferred_cleanup {

SimulatedDriver::SimulatedDriver() {
  worker_ = start_thread([this] { worker(); });
}

std::thread SimulatedDriver::start_thread(std::function<void()> fn) {
  int ok = succeed_thread_starts_.load(std::memory_order_relaxed);  // test setting
  while (ok > 0) {
    // One pass per allowed start; orders nothing else.
    if (succeed_thread_starts_.compare_exchange_weak(ok, ok - 1, std::memory_order_relaxed)) {
      return std::thread(std::move(fn));
    }
  }
  int n = fail_thread_starts_.load(std::memory_order_relaxed);  // test setting
  while (n > 0) {
    // One failure per injected count; orders nothing else.
    if (fail_thread_starts_.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) {
      throw std::system_error(EAGAIN, std::generic_category(),
                              "simulated driver: injected thread-start failure");
    }
  }
  return std::thread(std::move(fn));  // std::system_error when the system refuses
}

std::string SimulatedDriver::message(const char* text) {
  if (fail_message_allocs_ > 0) {  // under mu_ (attach)
    --fail_message_allocs_;
    throw std::bad_alloc();
  }
  return std::string(text);
}

SimulatedDriver::~SimulatedDriver() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    // A driver that goes away destroys what it still owns, as a CUDA context
    // teardown would: remaining graphs drop their references, held calls are
    // delivered.
    hold_ = false;
    synchronous_ = false;  // whoever drops the driver gets no destructor call
    paused_ = false;       // the worker delivers what is due before it stops
    for (auto& [handle, graph] : graphs_) {
      (void)handle;
      for (UserObject* uo : graph.objects) unref(uo);
      graph.objects.clear();
    }
    graphs_.clear();
    for (UserObject* uo : held_) {
      due_.push_back(uo);
      ++outstanding_;
    }
    held_.clear();
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
  join_bursts();
}

void SimulatedDriver::unref(UserObject* uo) {
  // Relaxed is enough: every reference change happens under mu_.
  if (uo->refs.fetch_sub(1, std::memory_order_relaxed) != 1)
    return;  // ordered by mu_, not by this atomic
  if (hold_) {
    held_.push_back(uo);
    return;
  }
  if (synchronous_) {
    uo->fn(uo->arg);  // on this thread, inside the driver call, mu_ held
    delete uo;
    delivered_.fetch_add(1, std::memory_order_release);  // read by delivered()
    return;
  }
  due_.push_back(uo);
  ++outstanding_;
  cv_.notify_one();
}

void SimulatedDriver::worker() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return stop_ || (!due_.empty() && !paused_); });
    if (due_.empty()) break;  // stop_ and nothing left
    UserObject* uo = due_.front();
    due_.pop_front();
    ++running_;
    lk.unlock();
    uo->fn(uo->arg);  // the destructor, on this native thread, no lock held
    delete uo;
    delivered_.fetch_add(1, std::memory_order_release);  // read by delivered()
    lk.lock();
    --running_;
    if (--outstanding_ == 0) idle_cv_.notify_all();
  }
}

GraphHandle SimulatedDriver::create_graph() {
  std::lock_guard<std::mutex> lk(mu_);
  const GraphHandle h = next_graph_++;
  graphs_.emplace(h, Graph{});
  return h;
}

AttachResult SimulatedDriver::attach(GraphHandle graph, DestructorFn destructor, void* arg) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = graphs_.find(graph);
  if (it == graphs_.end()) throw DriverError("simulated driver: unknown or destroyed graph");
  if (fail_creates_ > 0) {
    --fail_creates_;
    return {AttachStatus::not_created,
            message("simulated driver: injected failure of user-object creation")};
  }
  if (fail_retains_ > 0) {
    --fail_retains_;
    // Build the result first: once the destructor may fire, nothing here may
    // throw (the caller would clean the payload a second time).
    AttachResult r{AttachStatus::released,
                   message("simulated driver: injected failure of the hand-over to the graph")};
    auto* uo = new UserObject;
    uo->fn = destructor;
    uo->arg = arg;
    unref(uo);  // the creator's reference: the destructor fires now
    return r;
  }
  auto* uo = new UserObject;
  uo->fn = destructor;
  uo->arg = arg;
  it->second.objects.push_back(uo);  // CU_GRAPH_USER_OBJECT_MOVE: the graph takes our reference
  return {AttachStatus::attached, {}};
}

void SimulatedDriver::instantiate(GraphHandle graph) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = graphs_.find(graph);
  if (it == graphs_.end()) throw DriverError("simulated driver: unknown or destroyed graph");
  if (it->second.instantiated) return;
  it->second.instantiated = true;
  // The executable graph retains every user object of the graph once more;
  // destroy() drops both references.
  for (UserObject* uo : it->second.objects)
    uo->refs.fetch_add(1, std::memory_order_relaxed);  // under mu_
}

void SimulatedDriver::destroy(GraphHandle graph) {
  destroys_running_.fetch_add(1, std::memory_order_relaxed);  // read by destroys_running()
  struct Leave {
    std::atomic<int>& n;
    ~Leave() { n.fetch_sub(1, std::memory_order_relaxed); }
  } leave{destroys_running_};
  std::lock_guard<std::mutex> lk(mu_);
  auto it = graphs_.find(graph);
  if (it == graphs_.end()) throw DriverError("simulated driver: unknown or destroyed graph");
  const bool exec = it->second.instantiated;
  for (UserObject* uo : it->second.objects) {
    if (exec) unref(uo);  // the executable graph's reference
    unref(uo);            // the graph's reference
  }
  graphs_.erase(it);
}

void SimulatedDriver::set_hold(bool hold) {
  std::lock_guard<std::mutex> lk(mu_);
  hold_ = hold;
}

void SimulatedDriver::set_synchronous(bool on) {
  std::lock_guard<std::mutex> lk(mu_);
  synchronous_ = on;
}

void SimulatedDriver::set_paused(bool on) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    paused_ = on;
  }
  cv_.notify_all();  // unpaused: the worker looks at due_ again
}

std::size_t SimulatedDriver::held() const {
  std::lock_guard<std::mutex> lk(mu_);
  return held_.size();
}

std::size_t SimulatedDriver::release(int threads) {
  if (threads < 1) threads = 1;
  std::vector<UserObject*> batch;
  {
    std::lock_guard<std::mutex> lk(mu_);
    batch.swap(held_);
    outstanding_ += batch.size();
  }
  if (batch.empty()) return 0;
  const std::size_t n = batch.size();
  const std::size_t want = std::min<std::size_t>(static_cast<std::size_t>(threads), n);
  // A start gate instead of a std::barrier: the number of threads is known
  // only once every thread has started (a start may fail).
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool go = false;
    std::size_t threads = 0;
    std::vector<UserObject*> items;
  };
  auto gate = std::make_shared<Gate>();
  gate->items = std::move(batch);
  std::vector<std::thread> started;
  std::string failure;
  for (std::size_t i = 0; i < want; ++i) {
    try {
      started.push_back(start_thread([this, gate, i] {
        {
          std::unique_lock<std::mutex> lk(gate->mu);
          gate->cv.wait(lk, [&] { return gate->go; });
        }
        if (i == 0) {
          last_release_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count(),
                                 std::memory_order_release);  // read by last_release_ns()
        }
        const std::size_t t = gate->threads;  // written before go, under gate->mu
        std::size_t mine = 0;
        for (std::size_t k = i; k < gate->items.size(); k += t) {
          UserObject* uo = gate->items[k];
          uo->fn(uo->arg);
          delete uo;
          delivered_.fetch_add(1, std::memory_order_release);  // read by delivered()
          ++mine;
        }
        std::lock_guard<std::mutex> lk(mu_);
        outstanding_ -= mine;
        if (outstanding_ == 0) idle_cv_.notify_all();
      }));
    } catch (const std::system_error& e) {
      failure = e.what();
      break;
    }
  }
  if (started.empty()) {
    // Nothing was released: the calls go back to held, none is lost.
    std::lock_guard<std::mutex> lk(mu_);
    outstanding_ -= n;
    held_.insert(held_.end(), gate->items.begin(), gate->items.end());
    throw DriverError("simulated driver: release() could not start a thread (" + failure +
                      "); nothing was released, the destructor calls stay held");
  }
  {
    std::lock_guard<std::mutex> lk(gate->mu);
    gate->threads = started.size();
    gate->go = true;
  }
  gate->cv.notify_all();
  const std::size_t got = started.size();
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& th : started) bursts_.push_back(std::move(th));
  }
  if (got < want) {
    throw DriverError("simulated driver: release() started " + std::to_string(got) + " of " +
                      std::to_string(want) + " threads (" + failure + "); all " +
                      std::to_string(n) + " destructor calls were released with " +
                      std::to_string(got));
  }
  return n;
}

void SimulatedDriver::join_bursts() {
  std::vector<std::thread> done;
  {
    std::lock_guard<std::mutex> lk(mu_);
    done.swap(bursts_);
  }
  for (auto& th : done) th.join();
}

bool SimulatedDriver::wait_idle(std::chrono::milliseconds timeout) {
  bool idle;
  {
    std::unique_lock<std::mutex> lk(mu_);
    idle = idle_cv_.wait_for(lk, timeout, [this] { return outstanding_ == 0; });
  }
  if (idle) join_bursts();
  return idle;
}

void SimulatedDriver::fail_next_creates(int n) {
  std::lock_guard<std::mutex> lk(mu_);
  fail_creates_ = n;
}

void SimulatedDriver::fail_next_retains(int n) {
  std::lock_guard<std::mutex> lk(mu_);
  fail_retains_ = n;
}

void SimulatedDriver::fail_next_thread_starts(int n, int after) {
  succeed_thread_starts_.store(after, std::memory_order_relaxed);  // test setting
  fail_thread_starts_.store(n, std::memory_order_relaxed);         // test setting
}

void SimulatedDriver::fail_next_message_allocs(int n) {
  std::lock_guard<std::mutex> lk(mu_);
  fail_message_allocs_ = n;
}

std::uint64_t SimulatedDriver::lost_in_fork() const {
  std::lock_guard<std::mutex> lk(mu_);
  return lost_in_fork_;
}

std::uint64_t SimulatedDriver::after_fork_child() noexcept {
  // One thread exists in the child.  The locks may have been held by a
  // thread that is gone: make new ones.  The thread handles name threads that
  // do not exist here: never join or detach them, forget them (leaked).
  new (&mu_) std::mutex;
  new (&cv_) std::condition_variable;
  new (&idle_cv_) std::condition_variable;
  new std::thread(std::move(worker_));                      // leaked on purpose: not joinable here
  for (auto& th : bursts_) new std::thread(std::move(th));  // likewise
  bursts_.clear();
  // Calls that were running on those threads (the worker's current one and
  // every burst's) never finish in the child; what is still in due_ will.
  const std::uint64_t lost = outstanding_ > due_.size() ? outstanding_ - due_.size() : 0;
  lost_in_fork_ += lost;
  destroys_running_.store(0, std::memory_order_relaxed);  // no destroy() runs in the child
  running_ = 0;
  outstanding_ = due_.size();
  stop_ = false;
  try {
    worker_ = start_thread([this] { worker(); });
  } catch (...) {
    // No worker: due calls stay due; wait_idle() reports false.
  }
  return lost;
}

}  // namespace deferred_cleanup
