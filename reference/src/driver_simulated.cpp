// driver_simulated.cpp: the `simulated` driver.
//
// Reference-counted user objects with CUDA's contract (cuUserObjectCreate,
// cuGraphRetainUserObject with CU_GRAPH_USER_OBJECT_MOVE, cuGraphDestroy;
// CUDA Driver API, CUDA 12): a graph owns one reference per attached user
// object, an instantiated graph one more; when the count reaches zero the
// destructor runs later on a native thread of the driver's, a plain
// std::thread that never has a Python thread state.
//
// Test controls: holding destructor calls back and releasing them in a burst
// from N threads that start together at a std::barrier, and injecting
// failures of user-object creation or of the hand-over to the graph.
#include <barrier>

#include "drivers.hpp"

namespace deferred_cleanup {

SimulatedDriver::SimulatedDriver() : worker_([this] { worker(); }) {}

SimulatedDriver::~SimulatedDriver() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    // A driver that goes away destroys what it still owns, as a CUDA context
    // teardown would: remaining graphs drop their references, held calls are
    // delivered.
    hold_ = false;
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
  if (uo->refs.fetch_sub(1, std::memory_order_relaxed) != 1) return;  // ordered by mu_, not by this atomic
  if (hold_) {
    held_.push_back(uo);
    return;
  }
  due_.push_back(uo);
  ++outstanding_;
  cv_.notify_one();
}

void SimulatedDriver::worker() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return stop_ || !due_.empty(); });
    if (due_.empty()) break;  // stop_ and nothing left
    UserObject* uo = due_.front();
    due_.pop_front();
    lk.unlock();
    uo->fn(uo->arg);  // the destructor, on this native thread, no lock held
    delete uo;
    delivered_.fetch_add(1, std::memory_order_release);  // read by delivered()
    lk.lock();
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
    return {AttachStatus::not_created, "simulated driver: injected failure of user-object creation"};
  }
  auto* uo = new UserObject;
  uo->fn = destructor;
  uo->arg = arg;
  if (fail_retains_ > 0) {
    --fail_retains_;
    unref(uo);  // the creator's reference: the destructor fires now
    return {AttachStatus::released, "simulated driver: injected failure of the hand-over to the graph"};
  }
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
  for (UserObject* uo : it->second.objects) uo->refs.fetch_add(1, std::memory_order_relaxed);  // under mu_
}

void SimulatedDriver::destroy(GraphHandle graph) {
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
  const std::size_t t = std::min<std::size_t>(static_cast<std::size_t>(threads), n);
  auto shared = std::make_shared<std::vector<UserObject*>>(std::move(batch));
  auto on_release = [this]() noexcept {
    last_release_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count(),
                           std::memory_order_release);  // read by last_release_ns()
  };
  auto barrier = std::make_shared<std::barrier<decltype(on_release)>>(static_cast<std::ptrdiff_t>(t), on_release);
  std::vector<std::thread> started;
  for (std::size_t i = 0; i < t; ++i) {
    started.emplace_back([this, shared, barrier, i, t] {
      barrier->arrive_and_wait();  // all burst threads fire together
      std::size_t mine = 0;
      for (std::size_t k = i; k < shared->size(); k += t) {
        UserObject* uo = (*shared)[k];
        uo->fn(uo->arg);
        delete uo;
        delivered_.fetch_add(1, std::memory_order_release);  // read by delivered()
        ++mine;
      }
      std::lock_guard<std::mutex> lk(mu_);
      outstanding_ -= mine;
      if (outstanding_ == 0) idle_cv_.notify_all();
    });
  }
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& th : started) bursts_.push_back(std::move(th));
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

}  // namespace deferred_cleanup
