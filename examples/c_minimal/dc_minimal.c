/* SPDX-License-Identifier: Apache-2.0 */
#include <Python.h>
#include <pthread.h>
#include <stdatomic.h>

#include "deferred_cleanup/cpython/deferred_cleanup.h"

static dc_host* host;
static atomic_ulong in_flight; /* objects given to threads, not yet handed off */

/* The cleanup: on the main thread, GIL held. */
static void release(void* obj) { Py_DECREF((PyObject*)obj); }

/* At exit, wait (draining) while threads still hold objects. */
static uint64_t outstanding(void* Py_UNUSED(ctx)) { return atomic_load(&in_flight); }

/* A native thread: no GIL, no thread state; never blocks on Python. */
static void* worker(void* item) {
  dc_hand_off(host, item);
  atomic_fetch_sub(&in_flight, 1);
  return NULL;
}

/* release_later(obj): a native thread drops obj; it is released on the main thread. */
static PyObject* release_later(PyObject* Py_UNUSED(self), PyObject* obj) {
  if (dc_entry(host) != 0) return NULL;
  dc_item* item = dc_item_new(release, Py_NewRef(obj));
  pthread_t t;
  atomic_fetch_add(&in_flight, 1);
  if (item == NULL || pthread_create(&t, NULL, worker, item) != 0) {
    atomic_fetch_sub(&in_flight, 1);
    dc_item_discard(item);
    Py_DECREF(obj);
    return PyErr_NoMemory();
  }
  pthread_detach(t);
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {{"release_later", release_later, METH_O, NULL}, {NULL}};
static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "dc_minimal", .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit_dc_minimal(void) {
  dc_host_options opts = {.outstanding = outstanding};
  if ((host = dc_host_get(&opts)) == NULL) return NULL;
  return PyModule_Create(&module);
}
