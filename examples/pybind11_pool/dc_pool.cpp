// SPDX-License-Identifier: Apache-2.0
//
// dc_pool: a std::thread pool.  A task's completion hands its payload and
// callback to the main thread (deferred_cleanup::cpython::Host), where
// callback(payload) runs with the GIL held and both references are dropped.
// The worker threads never take the GIL.
#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "deferred_cleanup/cpython/host.hpp"

namespace py = pybind11;
namespace dc = deferred_cleanup::cpython;

namespace {

dc::Host* g_host = nullptr;
std::atomic<std::uint64_t> g_outstanding{0};  // submitted, not yet handed off
unsigned long g_main = 0;
std::uint64_t g_on_main = 0, g_off_main = 0;  // main thread, GIL held

/// What a completion releases: main thread, GIL held (its destructor too).
struct Completion {
  py::object payload, callback;
  ~Completion() {
    ++(PyThread_get_thread_ident() == g_main ? g_on_main : g_off_main);
    if (callback.is_none()) return;
    try {
      callback(payload);
    } catch (py::error_already_set& e) {
      e.restore();  // the host's rule: unraisable, or an interrupt after the drain
    }
  }
};

/// A pool made before fork() is not usable in the child (its threads are not
/// there): make a new one in the child and end the child with os._exit.
class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { run(); });
  }
  ~Pool() { close(); }

  /// Main thread or any Python thread, GIL held: the item is made here.
  void submit(py::object payload, py::object callback, int delay_ms) {
    if (g_host->entry() != 0) throw py::error_already_set();
    // Made in place: a copy's destructor would run the callback too.
    std::unique_ptr<Completion> c(new Completion{std::move(payload), std::move(callback)});
    dc::Item* item = dc::make_item(c);
    if (item == nullptr) throw std::bad_alloc();
    g_outstanding.fetch_add(1);
    {
      std::lock_guard<std::mutex> lk(mu_);
      tasks_.push_back({item, delay_ms});
    }
    cv_.notify_one();
  }

  void close() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      closing_ = true;
    }
    cv_.notify_all();
    py::gil_scoped_release nogil;  // workers never need the GIL; release it anyway
    for (auto& t : workers_)
      if (t.joinable()) t.join();
  }

 private:
  struct Task {
    dc::Item* item;
    int delay_ms;
  };
  void run() {  // a worker: no GIL, no thread state
    for (;;) {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [this] { return closing_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      Task t = tasks_.front();
      tasks_.pop_front();
      lk.unlock();
      if (t.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(t.delay_ms));
      g_host->hand_off(t.item);  // never blocks, allocates nothing
      g_outstanding.fetch_sub(1);
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  bool closing_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace

PYBIND11_MODULE(dc_pool, m) {
  dc::Options opts{};
  opts.outstanding = [](void*) -> std::uint64_t { return g_outstanding.load(); };
  g_host = dc::Host::get(opts);
  if (g_host == nullptr) throw py::error_already_set();
  g_main = PyThread_get_thread_ident();
  py::class_<Pool>(m, "Pool")
      .def(py::init<int>(), py::arg("threads") = 8)
      .def("submit", &Pool::submit, py::arg("payload"), py::arg("callback") = py::none(),
           py::arg("delay_ms") = 0)
      .def("close", &Pool::close);
  m.def("drain_now", [] {
    const std::int64_t n = g_host->drain_now();
    if (n < 0) throw py::error_already_set();
    return n;
  });
  m.def("counters", [] {
    const dc::Counters c = g_host->counters();
    py::dict d;
    d["handed_off"] = c.handed_off;
    d["cleaned"] = c.cleaned;
    d["deferred_interrupts"] = c.deferred_interrupts;
    d["unraisable"] = c.unraisable;
    d["released_on_main"] = g_on_main;
    d["released_off_main"] = g_off_main;
    return d;
  });
}
