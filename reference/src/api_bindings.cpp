// SPDX-License-Identifier: Apache-2.0
// api_bindings.cpp: the Python API of deferred_cleanup._native.
//
// Every main-thread API call is an entry point: it first runs the variant's
// entry-point step (drain.hpp, drain_at_entry), which in the reference
// drains directly (gh-95820).  Graph takes part in the garbage collector's
// protocol: a payload may reference its own graph through C++ (graph -> user
// object -> payload -> object -> graph), a cycle the collector cannot see
// unless Graph's tp_traverse visits the payloads it owns; its tp_clear
// destroys the driver graph, after which the destructors release the
// payloads on the main thread as usual.
#include <pybind11/critical_section.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <system_error>

#include "host.hpp"

namespace deferred_cleanup::host {

namespace {

void graph_attach(PyGraph& g, py::object obj, py::object finalizer) {
  entry();
  if (g.destroyed)
    throw GraphDestroyedError("attach() on a destroyed graph: the object was not retained");
  if (shut_down())
    throw ShutdownError(
        "deferred_cleanup has shut down (interpreter exit): attach() refused, the object was not "
        "retained");
  if (!finalizer.is_none() && !PyCallable_Check(finalizer.ptr()))
    throw py::type_error("finalizer must be callable or None");
  {
    std::lock_guard<std::mutex> lk(g_graphs_mu);  // counters() reads the vector of every graph
    if (g.payloads.size() == g.payloads.capacity()) {
      g.payloads.reserve(
          std::max<std::size_t>(16, 2 * g.payloads.capacity()));  // may throw: nothing created yet
    }
  }
  PyPayload* p = new_payload(obj, finalizer);
  AttachResult r;
  try {
    r = g.driver->attach(g.handle, destructor_fn(), p);
  } catch (...) {
    // Drivers throw only before a user object exists (driver.hpp): release
    // exactly once, here or (off the main thread) through the queue.
    release_uncreated(p);
    throw;
  }
  switch (r.status) {
    case AttachStatus::attached:
      g_counters.user_objects.fetch_add(1, std::memory_order_relaxed);  // statistics only
      {
        std::lock_guard<std::mutex> lk(g_graphs_mu);
        g.payloads.push_back(p);  // capacity reserved above: no allocation, no throw
        ++g.attached;
      }
      return;
    case AttachStatus::not_created:
      release_uncreated(p);
      throw DriverError(r.message + "; the object was released directly");
    case AttachStatus::released:
      g_counters.user_objects.fetch_add(1, std::memory_order_relaxed);  // statistics only
      throw DriverError(r.message +
                        "; the object is released through the user object's destructor");
  }
}

void graph_instantiate(PyGraph& g) {
  entry();
  if (g.destroyed) throw GraphDestroyedError("instantiate() on a destroyed graph");
  g.driver->instantiate(g.handle);
}

void graph_destroy(PyGraph& g) {
  entry();
  if (g.destroyed)
    throw GraphDestroyedError("destroy() called twice: the graph is already destroyed");
  g.destroy_once();
  release_after_exit();  // after the exit sequence: wait for its destructors, drain
  if (host_is_main_thread()) raise_deferred_interrupt();
}

/// A Graph method run inside the Graph object's critical section (no-op on a
/// GIL build): see g_graphs_mu in host.hpp for what protects what.
/// Thread: any Python thread.  Blocks: while another thread runs a method of
/// the same graph.  Errors: whatever the method raises.
/// Source: Doc/c-api/init.rst "Python Critical Section API" (3.13+).
template <auto F, class... A>
void locked(py::handle self, A... a) {
  py::scoped_critical_section cs{self};
  F(py::cast<PyGraph&>(self), std::move(a)...);
}

std::unique_ptr<PyGraph> create_graph(const std::shared_ptr<Driver>& d) {
  entry();
  auto g = std::make_unique<PyGraph>();
  g->driver = d;
  g->handle = d->create_graph();
  return g;
}

/// A CUDA driver with its info, as one Driver for the bindings.
class CudaDriverBox final : public Driver {
 public:
  explicit CudaDriverBox(const CudaOptions& o) : inner_(make_cuda_driver(&info_, o)) {}
  const char* name() const noexcept override { return "cuda"; }
  // mu_ serializes the calls: the CUDA driver's map of graphs is shared by
  // every graph of this driver, and Python threads may call at once on a
  // free-threaded build.  Never held across a call into Python.
  GraphHandle create_graph() override {
    std::lock_guard<std::mutex> lk(mu_);
    return inner_->create_graph();
  }
  AttachResult attach(GraphHandle g, DestructorFn fn, void* arg) override {
    std::lock_guard<std::mutex> lk(mu_);
    return inner_->attach(g, fn, arg);
  }
  void instantiate(GraphHandle g) override {
    std::lock_guard<std::mutex> lk(mu_);
    inner_->instantiate(g);
  }
  void destroy(GraphHandle g) override {
    std::lock_guard<std::mutex> lk(mu_);
    inner_->destroy(g);
  }
  const CudaInfo& info() const { return info_; }

 private:
  std::mutex mu_;
  CudaInfo info_;
  std::unique_ptr<Driver> inner_;
};

// GC protocol of Graph (pybind11 custom_type_setup; CPython
// Doc/c-api/gcsupport.rst and PEP 442).  tp_traverse visits the objects of
// the payloads an undestroyed graph owns, so a cycle through C++ is found.
// The collector first calls tp_finalize on the unreachable objects: ours
// destroys the driver graph, after which the payloads belong to the user
// objects' destructors and the queue, no longer to the graph, and traverse
// visits nothing.  The collector then sees the payloads' objects referenced
// from outside the cycle (resurrected) and clears none of them; the drain
// later releases them on the main thread and the graph dies by reference
// count.  Clearing them instead (tp_clear of the objects) would hand the
// finalizer a cleared object, or run a cleared function.
int graph_traverse(PyObject* self, visitproc visit, void* arg) {
#if PY_VERSION_HEX >= 0x03090000
  Py_VISIT(Py_TYPE(self));  // heap types must visit their type
#endif
  if (!py::detail::is_holder_constructed(self)) return 0;
  auto& g = py::cast<PyGraph&>(py::handle(self));
  if (g.destroyed) return 0;
  for (PyPayload* p : g.payloads) {
    Py_VISIT(p->obj);
    Py_VISIT(p->finalizer);
  }
  return 0;
}

void graph_destroy_quietly(PyObject* self) {
  if (!py::detail::is_holder_constructed(self)) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);  // tp_finalize must leave the error state alone
  try {
    py::scoped_critical_section cs{py::handle(self)};  // see g_graphs_mu (host.hpp)
    py::cast<PyGraph&>(py::handle(self)).destroy_once();
  } catch (...) {
    // The collector cannot take an exception; the graph is marked destroyed.
  }
  PyErr_Restore(type, value, tb);
}

void graph_finalize(PyObject* self) {
  graph_destroy_quietly(self);
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);  // tp_finalize must leave the error state alone
  release_after_exit();  // collected after the exit sequence: wait for its destructors, drain
  PyErr_Restore(type, value, tb);
}

int graph_clear(PyObject* self) {
  graph_destroy_quietly(self);  // normally done by tp_finalize already
  return 0;
}

}  // namespace

void register_api(py::module_& m) {
  // pybind11 tries the most recently registered translator first, so the
  // subclass DriverUnavailable is registered after its base DriverError.
  auto& driver_error = py::register_exception<DriverError>(m, "DriverError", PyExc_RuntimeError);
  py::register_exception<DriverUnavailable>(m, "DriverUnavailable", driver_error.ptr());
  py::register_exception<ShutdownError>(m, "ShutdownError", PyExc_RuntimeError);
  py::register_exception<NotMainThreadError>(m, "NotMainThreadError", PyExc_RuntimeError);
  py::register_exception<GraphDestroyedError>(m, "GraphDestroyedError", PyExc_RuntimeError);

  m.def(
      "stats",
      [] {
        entry();
        return counters();
      },
      "stats() -> dict\n\nAn entry point, then the counters; see deferred_cleanup.stats.");
  m.def("counters", &counters,
        "counters() -> dict\n\nThe counters as a relaxed snapshot; not an entry point.");
  m.def("drain_now", &drain_now,
        "drain_now() -> int\n\nRun every queued cleanup on the main thread; see "
        "deferred_cleanup.drain_now.");
  m.def(
      "poll",
      [] {
        note_finalizing();
        const EntryAction a = with_queue([](auto& q) { return drain_at_entry(q); });
        if (host_is_main_thread()) raise_deferred_interrupt();
        return a == EntryAction::drained       ? "drained"
               : a == EntryAction::rescheduled ? "rescheduled"
                                               : "nothing";
      },
      "poll() -> str\n\nThe entry-point step alone; see deferred_cleanup.poll.");

  // Registered before the drivers so that the signature pybind11 generates
  // for Driver.create_graph names deferred_cleanup._native.Graph.
  py::class_<PyGraph> graph_class(m, "Graph",
                                  py::custom_type_setup([](PyHeapTypeObject* heap_type) {
                                    auto* type = &heap_type->ht_type;
                                    type->tp_flags |= Py_TPFLAGS_HAVE_GC;
                                    type->tp_traverse = &graph_traverse;
                                    type->tp_clear = &graph_clear;
                                    type->tp_finalize = &graph_finalize;
                                  }),
                                  "A graph of a driver; created by Driver.create_graph().");

  py::class_<Driver, std::shared_ptr<Driver>>(
      m, "Driver", "Base class of the drivers (the C++ seam driver.hpp).")
      .def_property_readonly(
          "name", [](const Driver& d) { return std::string(d.name()); },
          "str: 'simulated' or 'cuda'.")
      .def(
          "create_graph", &create_graph,
          "create_graph() -> Graph\n\nAn entry point; creates an empty graph. Raises DriverError.");

  py::class_<SimulatedDriver, Driver, std::shared_ptr<SimulatedDriver>>(
      m, "SimulatedDriver",
      "SimulatedDriver()\n\nReference-counted user objects whose destructors run on a dedicated "
      "native "
      "thread with no Python thread state, plus test controls (hold, burst release, failure "
      "injection). "
      "Raises DriverError when its thread cannot be started.")
      .def(py::init([] {
        entry();
        std::shared_ptr<SimulatedDriver> d;
        try {
          d = std::make_shared<SimulatedDriver>();
        } catch (const std::system_error& e) {
          throw DriverError(std::string("simulated driver: cannot start its destructor thread: ") +
                            e.what());
        }
        track_simulated_driver(d);
        return d;
      }))
      .def(
          "set_hold",
          [](SimulatedDriver& d, py::object hold) { d.set_hold(bool_arg(hold, "set_hold(hold)")); },
          py::arg("hold"),
          "set_hold(hold: bool) -> None\n\nHold destructor calls back (True) or deliver them "
          "(False); "
          "turning holding off does not release what is held. Raises TypeError unless hold is "
          "a bool.")
      .def(
          "set_synchronous",
          [](SimulatedDriver& d, py::object on) {
            d.set_synchronous(bool_arg(on, "set_synchronous(on)"));
          },
          py::arg("on"),
          "set_synchronous(on: bool) -> None\n\nRun each destructor on the thread that drops "
          "the last reference, inside that call (True: destroy() on the main thread runs the "
          "destructor callback there, as cuGraphDestroy may), or on the driver's thread (False, "
          "the default). Holding takes precedence. Raises TypeError unless on is a bool.")
      .def(
          "set_paused",
          [](SimulatedDriver& d, py::object on) { d.set_paused(bool_arg(on, "set_paused(on)")); },
          py::arg("on"),
          "set_paused(on: bool) -> None\n\nPause the driver's thread (True): due destructor "
          "calls stay due and wait_idle() waits its whole timeout; False lets it go on. Dropping "
          "the driver unpauses it; a fork() child keeps the setting. Raises TypeError unless on "
          "is a bool.")
      .def_property_readonly("held", &SimulatedDriver::held, "int: destructor calls held back now.")
      .def(
          "release",
          [](SimulatedDriver& d, py::object threads) {
            return d.release(static_cast<int>(int_arg(threads, "release(threads)", 1, 1024)));
          },
          py::arg("threads") = 8,
          "release(threads: int = 8) -> int\n\nRelease every held destructor call in one burst "
          "from `threads` "
          "native threads (1 to 1024) that start together; returns at once with the number "
          "released. Raises "
          "TypeError unless threads is an int; ValueError outside 1..1024; DriverError when a "
          "thread "
          "cannot be started (the message says how many "
          "started and whether the calls were released with fewer threads or stay held).")
      .def(
          "wait_idle",
          [](SimulatedDriver& d, py::object timeout_s) {
            const auto t =
                checked_timeout(seconds_arg(timeout_s, "wait_idle(timeout_s)"), "wait_idle");
            return without_gil([&] {
              return d.wait_idle(std::chrono::duration_cast<std::chrono::milliseconds>(t));
            });
          },
          py::arg("timeout_s") = 10.0,
          "wait_idle(timeout_s: float = 10.0) -> bool\n\nWait (GIL released) until every due "
          "destructor call "
          "returned; False on timeout (seconds). Not an entry point. Raises TypeError unless "
          "timeout_s is an "
          "int or float; ValueError unless 0 <= timeout_s <= one year and finite.")
      .def(
          "fail_next_creates",
          [](SimulatedDriver& d, py::object n) {
            d.fail_next_creates(static_cast<int>(int_arg(n, "fail_next_creates(n)", 0, INT32_MAX)));
          },
          py::arg("n"),
          "fail_next_creates(n: int) -> None\n\nThe next n attach() calls fail before a user "
          "object exists "
          "(the payload is released directly, on the main thread, and DriverError raised). Raises "
          "TypeError "
          "unless n is an int; ValueError outside 0..2**31-1.")
      .def(
          "fail_next_retains",
          [](SimulatedDriver& d, py::object n) {
            d.fail_next_retains(static_cast<int>(int_arg(n, "fail_next_retains(n)", 0, INT32_MAX)));
          },
          py::arg("n"),
          "fail_next_retains(n: int) -> None\n\nThe next n attach() calls create the user object, "
          "then fail "
          "to hand it to the graph (its destructor fires; DriverError raised). Raises TypeError "
          "unless n is "
          "an int; ValueError outside 0..2**31-1.")
      .def(
          "_test_fail_thread_starts",
          [](SimulatedDriver& d, int n, int after) {
            if (n < 0 || after < 0)
              throw py::value_error("_test_fail_thread_starts: n and after must be >= 0");
            d.fail_next_thread_starts(n, after);
          },
          py::arg("n"), py::arg("after") = 0,
          "_test_fail_thread_starts(n: int, after: int = 0) -> None\n\nAfter `after` more "
          "successful starts, "
          "the next n native threads this driver starts fail as if the system refused "
          "(std::system_error, "
          "EAGAIN).")
      .def(
          "_test_fail_message_alloc",
          [](SimulatedDriver& d, int n) {
            if (n < 0) throw py::value_error("_test_fail_message_alloc: n must be >= 0");
            d.fail_next_message_allocs(n);
          },
          py::arg("n"),
          "_test_fail_message_alloc(n: int) -> None\n\nThe next n error messages attach() builds "
          "throw "
          "std::bad_alloc while being built.")
      .def_property_readonly("last_release_ns", &SimulatedDriver::last_release_ns,
                             "int: steady_clock time (ns) at which the last burst started, or 0.")
      .def_property_readonly("delivered", &SimulatedDriver::delivered,
                             "int: destructor calls delivered so far.")
      .def_property_readonly(
          "destroys_running", &SimulatedDriver::destroys_running,
          "int: destroy() calls running now, on any thread; with one thread calling destroy(), a "
          "finalizer that reads 1 ran inside it. 0 in a fork() child.")
      .def_property_readonly(
          "lost_in_fork", &SimulatedDriver::lost_in_fork,
          "int: destructor calls that were running on a thread that does not exist in this "
          "forked child (never delivered here).")
      .def(
          "_test_release_at_exit",
          [](const std::shared_ptr<SimulatedDriver>& d, int threads) {
            release_at_backstop(d, threads);
          },
          py::arg("threads") = 4,
          "_test_release_at_exit(threads: int = 4) -> None\n\nKeep this driver alive until the "
          "Py_AtExit "
          "backstop, which releases its held destructor calls from `threads` threads after "
          "finalization and "
          "waits for them.");

  py::class_<CudaDriverBox, Driver, std::shared_ptr<CudaDriverBox>>(
      m, "CudaDriver",
      "CudaDriver(spin_us: int = 0)\n\nThe CUDA driver API, opened at run time (dlopen "
      "libcuda.so.1, "
      "cuGetProcAddress), on device 0's primary context. spin_us > 0 (microseconds): every graph "
      "also holds "
      "one kernel node spinning that long before its empty node, so a launch keeps its user "
      "objects alive "
      "that long. Raises DriverUnavailable naming the reason (no cuda.h at build time, no libcuda, "
      "cuInit "
      "failure, no device), DriverError (spin kernel failed to load), TypeError (spin_us not an "
      "int), "
      "ValueError (spin_us outside 0..10**7).")
      .def(py::init([](py::object spin) {
             entry();
             const long long spin_us =
                 int_arg(spin, "CudaDriver(spin_us) in microseconds", 0, 10'000'000);
             return std::make_shared<CudaDriverBox>(
                 CudaOptions{static_cast<std::uint64_t>(spin_us)});
           }),
           py::arg("spin_us") = 0)
      .def_property_readonly(
          "driver_version", [](const CudaDriverBox& d) { return d.info().driver_version; },
          "int: cuDriverGetVersion (e.g. 12080 for 12.8).")
      .def_property_readonly(
          "device_name", [](const CudaDriverBox& d) { return d.info().device_name; },
          "str: cuDeviceGetName of device 0.");

  graph_class
      .def("attach", locked<&graph_attach, py::object, py::object>, py::arg("obj"),
           py::arg("finalizer") = py::none(),
           "attach(obj: object, finalizer: Callable[[object], None] | None = None) -> None\n\n"
           "An entry point. Keep obj alive until this graph's new user object dies; then, on the "
           "main thread, "
           "call finalizer(obj) (errors go to sys.unraisablehook; a KeyboardInterrupt or "
           "SystemExit stops the drain and is raised at once, and the rest runs later: "
           "Caveats, the early stop) and drop obj.\n"
           "Raises GraphDestroyedError (graph destroyed), ShutdownError (interpreter exiting), "
           "TypeError "
           "(finalizer not callable): obj is not retained. DriverError: creation failed (obj "
           "released on the "
           "main thread) or the hand-over failed (obj released through the destructor).")
      .def("instantiate", locked<&graph_instantiate>,
           "instantiate() -> None\n\nAn entry point. Instantiate the graph (CUDA: and launch it "
           "once, without "
           "waiting). Raises GraphDestroyedError, DriverError.")
      .def("destroy", locked<&graph_destroy>,
           "destroy() -> None\n\nAn entry point. Destroy the graph; user objects whose last "
           "reference goes "
           "away have their destructors called by the driver. Raises GraphDestroyedError when "
           "called twice, "
           "DriverError.")
      .def_property_readonly(
          "destroyed",
          [](py::handle self) {
            py::scoped_critical_section cs{self};
            return py::cast<const PyGraph&>(self).destroyed;
          },
          "bool: destroy() was called.")
      .def_property_readonly(
          "attached",
          [](py::handle self) {
            py::scoped_critical_section cs{self};
            return py::cast<const PyGraph&>(self).attached;
          },
          "int: objects attached successfully.");
}

}  // namespace deferred_cleanup::host
