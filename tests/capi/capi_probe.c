/* SPDX-License-Identifier: Apache-2.0
 *
 * dc_capi_probe: the C API's argument checks, its payload accessor and its
 * fork() behaviour, from a user's extension (tests/test_capi.py).
 * DC_CAPI_PROBE_EXIT_WAIT_MS (read at import) sets dc_host_options.exit_wait_ns.
 */
#include <Python.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deferred_cleanup/cpython/deferred_cleanup.h"

static dc_host* host;
static atomic_ullong cleaned;     /* our cleanups run (this process's copy) */
static atomic_ullong outstanding; /* what outstanding() reports; set from Python */
static int not_a_host;            /* an address that is no host */

/* A symbol of the user's own with default visibility (not static). */
int capi_probe_user_c(void) { return 1; }

static void release(void* obj) {
  Py_DECREF((PyObject*)obj);
  atomic_fetch_add(&cleaned, 1);
}

static void nothing(void* p) { (void)p; }

static int outstanding_raises;          /* set_outstanding_raises(): outstanding() raises */
static unsigned long outstanding_calls; /* outstanding() calls (main thread, GIL held) */

/* The user's outstanding(): the count set from Python, or, after
 * set_outstanding_raises(True), ValueError left set (and a non-zero count). */
static uint64_t report_outstanding(void* ctx) {
  (void)ctx;
  ++outstanding_calls;
  if (outstanding_raises) {
    PyErr_SetString(PyExc_ValueError, "dc_capi_probe: outstanding() raised on purpose");
    return 1;
  }
  return atomic_load(&outstanding);
}

/* item_new_null_cleanup() -> bool: dc_item_new(NULL, payload) returned NULL. */
static PyObject* item_new_null_cleanup(PyObject* self, PyObject* unused) {
  (void)self, (void)unused;
  dc_item* it = dc_item_new(NULL, &not_a_host);
  dc_item_discard(it);
  return PyBool_FromLong(it == NULL);
}

/* hand_off_null_item() -> int: dc_hand_off(host, NULL). */
static PyObject* hand_off_null_item(PyObject* self, PyObject* unused) {
  (void)self, (void)unused;
  return PyLong_FromLong(dc_hand_off(host, NULL));
}

/* hand_off_with(obj, which) -> (rc, payload_back): hand off an item releasing
 * obj, with which = "null" (NULL host), "other" (an address that is no host)
 * or "host" (this extension's).  On a refusal the item is still ours: its
 * payload is read back with dc_item_payload, released here, the item discarded. */
static PyObject* hand_off_with(PyObject* self, PyObject* args) {
  (void)self;
  PyObject* obj;
  const char* which;
  if (!PyArg_ParseTuple(args, "Os", &obj, &which)) return NULL;
  dc_host* h = strcmp(which, "host") == 0    ? host
               : strcmp(which, "other") == 0 ? (dc_host*)&not_a_host
                                             : NULL;
  dc_item* it = dc_item_new(release, Py_NewRef(obj));
  if (it == NULL) {
    Py_DECREF(obj);
    return PyErr_NoMemory();
  }
  int rc = dc_hand_off(h, it);
  PyObject* back = Py_None;
  if (rc != 0) {
    back = (PyObject*)dc_item_payload(it);
    dc_item_discard(it);
    Py_DECREF(obj); /* the reference the refused item held */
  }
  return Py_BuildValue("(iO)", rc, back);
}

typedef struct {
  int null_item, null_host, null_cleanup_refused;
} native_result;

static void* native(void* arg) {
  native_result* r = arg;
  r->null_item = dc_hand_off(host, NULL);
  dc_item* it = dc_item_new(nothing, NULL);
  r->null_host = dc_hand_off(NULL, it);
  if (r->null_host != 0) dc_item_discard(it);
  dc_item* bad = dc_item_new(NULL, NULL);
  r->null_cleanup_refused = bad == NULL;
  dc_item_discard(bad);
  return NULL;
}

/* null_calls_on_native_thread() -> (rc null item, rc null host, new refused):
 * the same calls from a thread with no thread state. */
static PyObject* null_calls_on_native_thread(PyObject* self, PyObject* unused) {
  (void)self, (void)unused;
  native_result r = {99, 99, 0};
  pthread_t t;
  PyThreadState* ts = PyEval_SaveThread(); /* the GIL released while it runs */
  int err = pthread_create(&t, NULL, native, &r);
  if (err == 0) pthread_join(t, NULL);
  PyEval_RestoreThread(ts);
  if (err != 0) return PyErr_NoMemory();
  return Py_BuildValue("(iii)", r.null_item, r.null_host, r.null_cleanup_refused);
}

/* payload_of(obj) -> (payload, null_item_gives_null): dc_item_payload of a new item. */
static PyObject* payload_of(PyObject* self, PyObject* obj) {
  (void)self;
  dc_item* it = dc_item_new(nothing, obj);
  if (it == NULL) return PyErr_NoMemory();
  PyObject* p = (PyObject*)dc_item_payload(it);
  dc_item_discard(it);
  return Py_BuildValue("(OO)", p, dc_item_payload(NULL) == NULL ? Py_True : Py_False);
}

/* Hand off one item per object of the list objs (main thread, GIL held);
 * 0, or -1 with MemoryError set when an item cannot be allocated. */
static int hand_off_each(PyObject* objs) {
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(objs); ++i) {
    PyObject* o = PyList_GET_ITEM(objs, i);
    dc_item* it = dc_item_new(release, Py_NewRef(o));
    if (it == NULL) {
      Py_DECREF(o);
      PyErr_NoMemory();
      return -1;
    }
    dc_hand_off(host, it);
  }
  return 0;
}

/* hand_off_and_fork(objs) -> (pid, cleaned_at_fork): hand off one item per
 * object from the main thread, then fork() at once, with no bytecode between
 * (CPython runs pending calls only between bytecodes).  cleaned_at_fork is our
 * count as fork() returned, in either process. */
static PyObject* hand_off_and_fork(PyObject* self, PyObject* objs) {
  (void)self;
  if (dc_entry(host) != 0) return NULL;
  if (!PyList_Check(objs)) return PyErr_Format(PyExc_TypeError, "a list");
  if (hand_off_each(objs) != 0) return NULL;
  PyOS_BeforeFork();
  pid_t pid = fork();
  unsigned long long at_fork = atomic_load(&cleaned);
  if (pid == 0) {
    PyOS_AfterFork_Child();
  } else {
    PyOS_AfterFork_Parent();
    if (pid < 0) return PyErr_SetFromErrno(PyExc_OSError);
  }
  return Py_BuildValue("(lK)", (long)pid, at_fork);
}

static unsigned long fillers_added; /* our own pending calls in CPython's ring */
static unsigned long fillers_ran;   /* of those, run (main thread, GIL held) */

/* A pending call of the user's own that does nothing: it only takes a slot. */
static int filler(void* arg) {
  (void)arg;
  ++fillers_ran;
  return 0;
}

/* hand_off_while_ring_full(objs) -> (fillers, host_calls_added): fill
 * CPython's pending-call ring with our own calls (Py_AddPendingCall returns
 * -1 once it is full: 31 slots on 3.10-3.12, 32 on 3.13+, Python/ceval.c
 * v3.10.0, Python/ceval_gil.c v3.13.0), hand off one item per object (the
 * host's own Py_AddPendingCall is refused, so the item stays queued with no
 * pending call of the host's anywhere), then run CPython's pending calls
 * (Py_MakePendingCalls, main thread) until every filler ran: the ring is
 * empty again and the items are still queued.  No bytecode runs in between
 * (CPython runs pending calls only between bytecodes).  host_calls_added is
 * how many pending calls of the host's CPython accepted meanwhile. */
static PyObject* hand_off_while_ring_full(PyObject* self, PyObject* objs) {
  (void)self;
  if (dc_entry(host) != 0) return NULL;
  if (!PyList_Check(objs)) return PyErr_Format(PyExc_TypeError, "a list");
  dc_counters before, after;
  dc_get_counters(host, &before);
  unsigned long added = 0;
  while (added < 1000 && Py_AddPendingCall(filler, NULL) == 0) ++added; /* 1000: a bound */
  fillers_added += added;
  if (hand_off_each(objs) != 0) return NULL;
  dc_get_counters(host, &after);
  for (int k = 0; k < 1000 && fillers_ran < fillers_added; ++k) /* 1000: a bound */
    if (Py_MakePendingCalls() != 0) return NULL;
  if (fillers_ran != fillers_added)
    return PyErr_Format(PyExc_RuntimeError, "%lu of %lu filler pending calls ran", fillers_ran,
                        fillers_added);
  return Py_BuildValue("(kK)", added, after.pending_calls - before.pending_calls);
}

/* entry() -> None: the API entry point dc_entry(), as a user's function calls it first. */
static PyObject* entry(PyObject* self, PyObject* unused) {
  (void)self, (void)unused;
  if (dc_entry(host) != 0) return NULL;
  Py_RETURN_NONE;
}

static PyObject* set_outstanding(PyObject* self, PyObject* n) {
  (void)self;
  unsigned long long v = PyLong_AsUnsignedLongLong(n);
  if (PyErr_Occurred()) return NULL;
  atomic_store(&outstanding, v);
  Py_RETURN_NONE;
}

static PyObject* set_outstanding_raises(PyObject* self, PyObject* flag) {
  (void)self;
  int v = PyObject_IsTrue(flag);
  if (v < 0) return NULL;
  outstanding_raises = v;
  Py_RETURN_NONE;
}

/* outstanding_calls() -> int: how often the host called outstanding(). */
static PyObject* get_outstanding_calls(PyObject* self, PyObject* unused) {
  (void)self, (void)unused;
  return PyLong_FromUnsignedLong(outstanding_calls);
}

/* counters() -> dict: the host's handed_off, its cleaned, and ours. */
static PyObject* counters(PyObject* self, PyObject* unused) {
  (void)self, (void)unused;
  dc_counters c;
  dc_get_counters(host, &c); /* no dc_entry: reading drains nothing */
  return Py_BuildValue("{sKsKsK}", "handed_off", c.handed_off, "cleaned", c.cleaned, "ours",
                       atomic_load(&cleaned));
}

static PyObject* drain_now(PyObject* self, PyObject* unused) {
  (void)self, (void)unused;
  int64_t n = dc_drain_now(host);
  return n < 0 ? NULL : PyLong_FromLongLong(n);
}

static PyMethodDef methods[] = {
    {"item_new_null_cleanup", item_new_null_cleanup, METH_NOARGS, NULL},
    {"hand_off_null_item", hand_off_null_item, METH_NOARGS, NULL},
    {"hand_off_with", hand_off_with, METH_VARARGS, NULL},
    {"null_calls_on_native_thread", null_calls_on_native_thread, METH_NOARGS, NULL},
    {"payload_of", payload_of, METH_O, NULL},
    {"hand_off_and_fork", hand_off_and_fork, METH_O, NULL},
    {"hand_off_while_ring_full", hand_off_while_ring_full, METH_O, NULL},
    {"entry", entry, METH_NOARGS, NULL},
    {"set_outstanding", set_outstanding, METH_O, NULL},
    {"set_outstanding_raises", set_outstanding_raises, METH_O, NULL},
    {"outstanding_calls", get_outstanding_calls, METH_NOARGS, NULL},
    {"counters", counters, METH_NOARGS, NULL},
    {"drain_now", drain_now, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "dc_capi_probe", .m_size = -1,
                                    .m_methods = methods};

PyMODINIT_FUNC PyInit_dc_capi_probe(void) {
  dc_host_options opts = {0};
  const char* wait_ms = getenv("DC_CAPI_PROBE_EXIT_WAIT_MS");
  if (wait_ms != NULL) opts.exit_wait_ns = (int64_t)atoll(wait_ms) * 1000000;
  opts.outstanding = report_outstanding;
  if ((host = dc_host_get(&opts)) == NULL) return NULL;
  return PyModule_Create(&module);
}
