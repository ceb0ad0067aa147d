/* SPDX-License-Identifier: Apache-2.0
 *
 * dc_threadpool: native threads complete work items; each completion hands
 * its item to the main thread, whose cleanup calls a Python callback with the
 * item's Python payload and drops the payload.  Nothing here takes the GIL
 * off the main thread. */
#include <Python.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "deferred_cleanup/cpython/deferred_cleanup.h"

static dc_host* host;
static unsigned long main_ident;
static atomic_ullong not_yet_completed;      /* items started but not handed off */
static unsigned long long on_main, off_main; /* main thread, GIL held */

typedef struct {
  PyObject* obj;      /* strong references, dropped by the cleanup */
  PyObject* callback; /* or NULL */
} payload;

/* Main thread, GIL held: call callback(obj), drop both.  An exception it
 * raises stays set: the host reports it (see deferred_cleanup.h). */
static void release(void* arg) {
  payload* p = arg;
  if (PyThread_get_thread_ident() == main_ident)
    ++on_main;
  else
    ++off_main;
  if (p->callback != NULL) {
    PyObject* r = PyObject_CallOneArg(p->callback, p->obj);
    Py_XDECREF(r);
  }
  Py_DECREF(p->obj);
  Py_XDECREF(p->callback);
  PyMem_RawFree(p);
}

typedef struct {
  dc_item** items;
  Py_ssize_t n;
  long delay_ms;
} job;

/* A worker: no thread state, never touches Python. */
static void* worker(void* arg) {
  job* j = arg;
  if (j->delay_ms > 0) {
    struct timespec ts = {j->delay_ms / 1000, (j->delay_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  for (Py_ssize_t i = 0; i < j->n; ++i) {
    dc_hand_off(host, j->items[i]);
    atomic_fetch_sub(&not_yet_completed, 1);
  }
  PyMem_RawFree(j->items);
  PyMem_RawFree(j);
  return NULL;
}

/* complete(objs, callback=None, threads=8, delay_ms=0, join=True) */
static PyObject* complete(PyObject* Py_UNUSED(self), PyObject* args, PyObject* kw) {
  static char* names[] = {"objs", "callback", "threads", "delay_ms", "join", NULL};
  PyObject *objs, *callback = Py_None;
  int threads = 8, join = 1;
  long delay_ms = 0;
  if (dc_entry(host) != 0) return NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|Oilp", names, &PyList_Type, &objs, &callback,
                                   &threads, &delay_ms, &join))
    return NULL;
  if (threads < 1 || threads > 64) return PyErr_Format(PyExc_ValueError, "threads: 1..64");
  Py_ssize_t n = PyList_GET_SIZE(objs);
  pthread_t tids[64];
  int started = 0;
  for (int t = 0; t < threads; ++t) {
    Py_ssize_t lo = n * t / threads, hi = n * (t + 1) / threads;
    job* j = PyMem_RawMalloc(sizeof(job));
    dc_item** items = PyMem_RawMalloc(sizeof(dc_item*) * (size_t)(hi - lo + 1));
    if (j == NULL || items == NULL) return PyErr_NoMemory(); /* example: leaks on OOM */
    for (Py_ssize_t i = lo; i < hi; ++i) {                   /* preallocate while we may */
      payload* p = PyMem_RawMalloc(sizeof(payload));
      if (p == NULL || (items[i - lo] = dc_item_new(release, p)) == NULL) return PyErr_NoMemory();
      p->obj = Py_NewRef(PyList_GET_ITEM(objs, i));
      p->callback = callback == Py_None ? NULL : Py_NewRef(callback);
    }
    j->items = items;
    j->n = hi - lo;
    j->delay_ms = delay_ms;
    atomic_fetch_add(&not_yet_completed, (unsigned long long)(hi - lo));
    if (pthread_create(&tids[t], NULL, worker, j) != 0) return PyErr_SetFromErrno(PyExc_OSError);
    ++started;
  }
  if (join) {
    Py_BEGIN_ALLOW_THREADS for (int t = 0; t < started; ++t) pthread_join(tids[t], NULL);
    Py_END_ALLOW_THREADS
  } else {
    for (int t = 0; t < started; ++t) pthread_detach(tids[t]);
  }
  Py_RETURN_NONE;
}

/* Step 0 of the exit sequence waits while this says work is due. */
static uint64_t outstanding(void* ctx) {
  (void)ctx;
  return atomic_load(&not_yet_completed);
}

static PyObject* drain_now(PyObject* Py_UNUSED(self), PyObject* Py_UNUSED(unused)) {
  int64_t n = dc_drain_now(host);
  return n < 0 ? NULL : PyLong_FromLongLong(n);
}

static PyObject* counters(PyObject* Py_UNUSED(self), PyObject* Py_UNUSED(unused)) {
  dc_counters c;
  if (dc_entry(host) != 0) return NULL;
  dc_get_counters(host, &c);
  return Py_BuildValue("{sKsKsKsKsKsKsKsKsKsisisKsKsK}", "handed_off", c.handed_off,
                       "handed_off_late", c.handed_off_late, "cleaned", c.cleaned,
                       "cleaned_off_main", c.cleaned_off_main, "pending_calls", c.pending_calls,
                       "direct_drains", c.direct_drains, "deferred_interrupts",
                       c.deferred_interrupts, "unraisable", c.unraisable, "leaked_at_exit",
                       c.leaked_at_exit, "exit_sequence_ran", c.exit_sequence_ran, "host_alive",
                       c.host_alive, "released_on_main", on_main, "released_off_main", off_main,
                       "interrupts_held_at_flush", c.interrupts_held_at_flush);
}

static PyMethodDef methods[] = {
    {"complete", (PyCFunction)(void (*)(void))complete, METH_VARARGS | METH_KEYWORDS,
     "complete(objs: list, callback=None, threads: int = 8, delay_ms: int = 0, join: bool = True)"
     " -> None\n\nComplete one item per object on `threads` native threads (after delay_ms)."},
    {"drain_now", drain_now, METH_NOARGS, "drain_now() -> int: cleanups run now."},
    {"counters", counters, METH_NOARGS, "counters() -> dict: the host's counters."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "dc_threadpool", .m_size = -1,
                                    .m_methods = methods};

PyMODINIT_FUNC PyInit_dc_threadpool(void) {
  dc_host_options opts = {0};
  opts.outstanding = outstanding;
  if ((host = dc_host_get(&opts)) == NULL) return NULL;
  main_ident = PyThread_get_thread_ident();
  return PyModule_Create(&module);
}
