// SPDX-License-Identifier: Apache-2.0
// altpool: the handoffs an extension author could pick instead of
// deferred_cleanup, on one workload, for tools/alternatives.py.
//
// The workload: a std::thread pool (8 worker threads by default) completes n
// jobs; each completion must call a Python callback with its payload and
// release the payload (drop the last reference).  How a completion reaches
// Python is the handoff under test:
//
//   gil     pybind11's py::gil_scoped_acquire (PyGILState_Ensure) on the worker,
//           then the call and the decref there (pybind11/gil.h, v3.1.0).
//   guard   CPython 3.15's PEP 788 interpreter guard on the worker:
//           PyInterpreterGuard_FromView(view) + PyThreadState_Ensure(guard),
//           the call and the decref, PyThreadState_Release, Close; a refused
//           guard leaks the payload (Include/pystate.h, v3.15.0rc1; gh-149101).
//   asyncio the worker takes the GIL as in `gil` and hands the callback and
//           the payload to loop.call_soon_threadsafe; the loop runs them on
//           the main thread (Lib/asyncio/base_events.py).
//   mutexq  the worker pushes onto a std::mutex-guarded list and, when the list
//           was empty, calls Py_AddPendingCall once; the pending call drains
//           the list on the main thread.  After the module's atexit close the
//           worker leaks the payload.  The shape of greenlet's cross-thread
//           destruction (src/greenlet/TThreadStateDestroy.cpp: a locked list,
//           Py_AddPendingCall when the first item goes in, a drain loop that
//           takes one item at a time under the lock, a leak once the
//           interpreter is gone); the atexit close is ours.
//
// What happened is counted in a Counters block that the parent can read even
// when the child crashed: with ALTPOOL_COUNTS=PATH set at import, the block is
// a MAP_SHARED mapping of that file.  Payload's C++ destructor counts each
// release and whether it ran on the main thread (the thread that imported the
// module); note() counts each callback the same way.
//
// The pool is a leaky singleton (never destroyed, never joined), as C++
// libraries often make a global pool to stay out of static destruction order:
// at interpreter exit its workers are wherever they are.  Not part of the
// project's API: a measuring tool, built in a scratch directory.
#include <pybind11/pybind11.h>

#include <Python.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

// Relaxed counters: each is a tally read after the workers are done, or after
// the process ended (from the file); no other memory is published through them.
struct Counters {
  std::atomic<std::uint64_t> submitted, released, released_main, callbacks, callbacks_main, leaked,
      guard_refused, add_failed, workers_done;
};

Counters* g_counts = nullptr;
pthread_t g_main;

bool on_main() { return pthread_equal(pthread_self(), g_main) != 0; }

void map_counters() {
  const char* path = std::getenv("ALTPOOL_COUNTS");
  void* mem = MAP_FAILED;
  if (path != nullptr && *path != '\0') {
    const int fd = ::open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0 && ::ftruncate(fd, sizeof(Counters)) == 0) {
      mem = ::mmap(nullptr, sizeof(Counters), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    if (fd >= 0) ::close(fd);
  }
  if (mem == MAP_FAILED) {
    mem = ::mmap(nullptr, sizeof(Counters), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                 0);
  }
  if (mem == MAP_FAILED) throw std::runtime_error("altpool: cannot map the counters");
  g_counts = new (mem) Counters{};  // the mapping is zero-filled; placement-new names it
}

void bump(std::atomic<std::uint64_t>& c) { c.fetch_add(1, std::memory_order_relaxed); }

// The payload: a Python object whose release is counted where it happens.
struct Payload {
  ~Payload() {
    bump(g_counts->released);
    if (on_main()) bump(g_counts->released_main);
  }
};

struct Job {
  PyObject* payload;   // owned reference
  PyObject* callback;  // owned reference
};

// Call the callback with the payload and drop both references.  Needs an
// attached thread state; a callback's exception is reported as unraisable.
void complete_with_python(Job j) {
  PyObject* r = PyObject_CallFunctionObjArgs(j.callback, j.payload, nullptr);
  if (r == nullptr) PyErr_WriteUnraisable(j.callback);
  Py_XDECREF(r);
  Py_DECREF(j.callback);
  Py_DECREF(j.payload);
}

// ------------------------------------------------------------------ mutexq
std::mutex g_mq_lock;
std::deque<Job> g_mq;      // guarded by g_mq_lock
bool g_mq_closed = false;  // guarded by g_mq_lock

// Main thread (a pending call, or the atexit close), GIL held.
int mq_drain(void*) {
  for (;;) {
    Job j;
    {
      std::lock_guard<std::mutex> lk(g_mq_lock);
      if (g_mq.empty()) break;
      j = g_mq.front();
      g_mq.pop_front();
    }
    complete_with_python(j);
  }
  return 0;
}

// Worker thread, no thread state.
void mq_push(Job j) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lk(g_mq_lock);
    if (g_mq_closed) {
      bump(g_counts->leaked);  // the interpreter is going: leak, touch nothing
      return;
    }
    g_mq.push_back(j);
    first = g_mq.size() == 1;
  }
  if (first && Py_AddPendingCall(mq_drain, nullptr) != 0) bump(g_counts->add_failed);
}

// Main thread, from an atexit handler registered at import: stop accepting,
// then release what is queued.
void mq_close() {
  {
    std::lock_guard<std::mutex> lk(g_mq_lock);
    g_mq_closed = true;
  }
  mq_drain(nullptr);
}

// ------------------------------------------------------------------- guard
#if PY_VERSION_HEX >= 0x030F0000
PyInterpreterView* g_view = nullptr;  // made at import on the main thread, never closed
#endif

// ------------------------------------------------------------------- pool
enum class Handoff { gil, guard, asyncio, mutexq };

Handoff parse_handoff(const std::string& s) {
  if (s == "gil") return Handoff::gil;
  if (s == "guard") return Handoff::guard;
  if (s == "asyncio") return Handoff::asyncio;
  if (s == "mutexq") return Handoff::mutexq;
  throw py::value_error("handoff must be gil, guard, asyncio or mutexq, not " + s);
}

// One batch: the jobs, a shared index the workers take from, the loop (asyncio).
struct Batch {
  Handoff how;
  std::vector<Job> jobs;
  std::atomic<std::size_t> next{0};
  PyObject* loop_call = nullptr;  // owned: loop.call_soon_threadsafe (asyncio only)
};

// Worker thread, no thread state: complete one job through the handoff.
void complete(Batch& b, Job j) {
  switch (b.how) {
    case Handoff::gil: {
      py::gil_scoped_acquire gil;
      complete_with_python(j);
      return;
    }
    case Handoff::asyncio: {
      py::gil_scoped_acquire gil;
      PyObject* r = PyObject_CallFunctionObjArgs(b.loop_call, j.callback, j.payload, nullptr);
      if (r == nullptr) PyErr_WriteUnraisable(b.loop_call);  // e.g. the loop is closed
      Py_XDECREF(r);
      Py_DECREF(j.callback);
      Py_DECREF(j.payload);  // the handle holds its own references when it was accepted
      return;
    }
    case Handoff::mutexq:
      mq_push(j);
      return;
    case Handoff::guard: {
#if PY_VERSION_HEX >= 0x030F0000
      PyInterpreterGuard* g = PyInterpreterGuard_FromView(g_view);
      if (g == nullptr) {
        bump(g_counts->guard_refused);
        bump(g_counts->leaked);  // finalization refused the guard: leak, touch nothing
        return;
      }
      PyThreadStateToken* t = PyThreadState_Ensure(g);
      if (t == nullptr) {
        bump(g_counts->leaked);
      } else {
        complete_with_python(j);
        PyThreadState_Release(t);
      }
      PyInterpreterGuard_Close(g);
#endif
      return;
    }
  }
}

void worker(Batch* b) {
  for (;;) {
    const std::size_t i = b->next.fetch_add(1, std::memory_order_relaxed);
    if (i >= b->jobs.size()) break;
    complete(*b, b->jobs[i]);
  }
  bump(g_counts->workers_done);
}

// Main thread, GIL held.  Start `threads` detached workers completing one job
// per payload; returns at once.  The batch is never freed (the pool is leaky).
std::size_t run(const std::string& handoff, py::list payloads, py::object callback, int threads,
                py::object loop) {
  Batch* b = new Batch;
  b->how = parse_handoff(handoff);
#if PY_VERSION_HEX < 0x030F0000
  if (b->how == Handoff::guard) throw py::value_error("guard: PEP 788 needs CPython 3.15");
#endif
  if (b->how == Handoff::asyncio) {
    b->loop_call = py::object(loop.attr("call_soon_threadsafe")).release().ptr();
  }
  b->jobs.reserve(payloads.size());
  for (py::handle p : payloads) {
    b->jobs.push_back(Job{p.inc_ref().ptr(), callback.inc_ref().ptr()});
    bump(g_counts->submitted);
  }
  // The jobs own the payloads now: empty the caller's list before any worker
  // starts, so that a completion drops the last reference.
  if (PyList_SetSlice(payloads.ptr(), 0, PY_SSIZE_T_MAX, nullptr) != 0)
    throw py::error_already_set();
  for (int t = 0; t < threads; ++t) std::thread(worker, b).detach();
  return b->jobs.size();
}

}  // namespace

PYBIND11_MODULE(altpool, m) {
  g_main = pthread_self();
  map_counters();
#if PY_VERSION_HEX >= 0x030F0000
  g_view = PyInterpreterView_FromMain();
#endif
  py::class_<Payload>(m, "Payload").def(py::init<>());
  m.def(
      "note",
      [](py::handle) {
        bump(g_counts->callbacks);
        if (on_main()) bump(g_counts->callbacks_main);
      },
      "note(payload) -> None: count one callback and whether it ran on the main thread.");
  m.def("run", &run, py::arg("handoff"), py::arg("payloads"), py::arg("callback"),
        py::arg("threads") = 8, py::arg("loop") = py::none(),
        "run(handoff, payloads, callback, threads=8, loop=None) -> int: complete one job per "
        "payload on `threads` detached workers through the handoff; returns at once.");
  m.def(
      "counts",
      [] {
        py::dict d;
        d["submitted"] = g_counts->submitted.load();
        d["released"] = g_counts->released.load();
        d["released_main"] = g_counts->released_main.load();
        d["callbacks"] = g_counts->callbacks.load();
        d["callbacks_main"] = g_counts->callbacks_main.load();
        d["leaked"] = g_counts->leaked.load();
        d["guard_refused"] = g_counts->guard_refused.load();
        d["add_failed"] = g_counts->add_failed.load();
        d["workers_done"] = g_counts->workers_done.load();
        return d;
      },
      "counts() -> dict[str, int]: the counters.");
  m.def("mutexq_close", &mq_close, "The mutex queue's atexit close (registered at import).");
  m.attr("FIELDS") =
      py::make_tuple("submitted", "released", "released_main", "callbacks", "callbacks_main",
                     "leaked", "guard_refused", "add_failed", "workers_done");
  m.attr("HAVE_GUARD") = py::bool_(PY_VERSION_HEX >= 0x030F0000);
  py::module_::import("atexit").attr("register")(m.attr("mutexq_close"));
}
