// SPDX-License-Identifier: Apache-2.0
// core_only.cpp: the smallest use of the core.  Python hands objects to
// start(); worker threads hand them back to the main thread as typed items,
// without the GIL and without allocating; drain() releases them on the main
// thread.  The host has no pending call: the main thread drains when asked.
#include <pybind11/pybind11.h>

#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "deferred_cleanup/deferred_cleanup.hpp"

namespace py = pybind11;
namespace dc = deferred_cleanup;

namespace {

std::thread::id g_main = std::this_thread::get_id();  // the importing thread

bool is_main_thread() { return std::this_thread::get_id() == g_main; }
// No pending call: accept and never run it.  The claim stays taken, so every
// later hand_off is one push and one load; drain() does the work.
int no_pending_call(dc::PendingCallFn, void*) { return 0; }

const dc::Host kHost = [] {
  dc::Host h;
  h.add_pending_call = &no_pending_call;
  h.is_main_thread = &is_main_thread;
  return h;
}();
dc::Queue g_queue(&kHost);

// A Python object owned by an item: released (Py_DECREF) by the item's
// cleanup, on the main thread, with the GIL held by drain()'s caller.
struct Owned {
  explicit Owned(PyObject* o) noexcept : obj(o) {}
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { Py_XDECREF(obj); }
  PyObject* obj;
};

std::vector<std::thread> g_workers;

void start(const py::list& objects, int threads) {
  if (threads < 1) throw py::value_error("threads must be >= 1");
  std::vector<std::vector<std::unique_ptr<dc::Item<Owned>>>> batches(threads);
  std::size_t i = 0;
  for (py::handle o : objects) {  // allocate every item here, on the main thread
    batches[i++ % threads].push_back(dc::make_item<Owned>(o.inc_ref().ptr()));
  }
  for (auto& batch : batches) {
    g_workers.emplace_back([b = std::move(batch)]() mutable {
      for (auto& item : b) dc::hand_off(g_queue, std::move(item));  // no GIL, no allocation
    });
  }
}

void join() {
  py::gil_scoped_release nogil;
  for (auto& t : g_workers) t.join();
  g_workers.clear();
}

std::size_t drain() {
  dc::DrainNowResult r = dc::drain_now(g_queue);
  if (r.status != dc::DrainNowStatus::drained)
    throw py::value_error("drain() runs on the main thread only");
  return r.cleaned;
}

}  // namespace

PYBIND11_MODULE(core_only, m) {
  m.doc() = "deferred_cleanup core only: worker threads hand objects to the main thread";
  m.def("start", &start, py::arg("objects"), py::arg("threads"),
        "start(objects, threads): worker threads hand the objects back as typed items");
  m.def("join", &join, "join(): wait for the workers");
  m.def("drain", &drain, "drain() -> int: release the handed-off objects on this thread");
  m.attr("version") = DEFERRED_CLEANUP_VERSION_STRING;
}
