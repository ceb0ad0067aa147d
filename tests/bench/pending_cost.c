// SPDX-License-Identifier: Apache-2.0
/* pending_cost.c: the producer's cost of one Py_AddPendingCall, measured from
 * foreign threads (threads with no thread state, as a CUDA destructor thread
 * is), while the main thread consumes the calls.  Built and driven per
 * interpreter by tools/bench_pending.py; the module is _dc_pending_cost.
 *
 * Method.  The caller's thread (the main thread, holding the GIL) starts T
 * pthreads and then, until they finish, runs Py_MakePendingCalls() whenever
 * the number of calls added exceeds the number run, so every added call is
 * consumed on the main thread by CPython's own pending-call machinery.  Each
 * producer runs R rounds; in a round every producer waits at a spinning
 * barrier, reads CLOCK_MONOTONIC, calls Py_AddPendingCall(noop, NULL), reads
 * the clock again, and then waits until every call of the round has run.  So
 * each call finds the ring empty of our calls (uncontended: T = 1) or races
 * with the T - 1 other producers' calls of the same round (T = 8); a round
 * adds fewer calls than the smallest capacity the probe measures
 * (reference/python/deferred_cleanup/cpython_facts.py, field
 * capacity), so the ring never fills and no call is
 * refused.  A refusal would be counted, not timed.
 *
 * The time reported per call is t1 - t0 minus the median of the clock pair
 * alone (measured first, on the same thread kind); clock_gettime is the vDSO
 * call, about 20 ns, and its resolution is coarse next to one call, so a
 * window may hold a batch of back-to-back calls (then its time, less the
 * clock pair, is divided by the batch).  The median and tail are over all
 * windows of all threads.
 *
 * Sources: Py_AddPendingCall and Py_MakePendingCalls (Doc/c-api/init.rst;
 * Python/ceval_gil.c v3.12.0, _PyEval_AddPendingCall and _push_pending_call,
 * which take the pending-call lock and set the eval breaker).
 *
 * Thread: measure() runs on the main thread with the GIL held and returns once
 * every producer joined.  Blocking: it spins (no sleep) until the last call
 * ran.  Errors: ValueError for counts out of range, MemoryError, RuntimeError
 * if a thread cannot start.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_long g_added;   /* calls accepted by Py_AddPendingCall */
static atomic_long g_ran;     /* calls that ran (noop, main thread) */
static atomic_long g_refused; /* calls refused (-1): counted, not timed */
static atomic_int g_arrived;  /* the barrier: producers arrived this round */
static atomic_int g_round;    /* the barrier: the round now released */
static atomic_int g_live;     /* producers not yet finished */

typedef struct {
  int index;
  int threads;
  int rounds;
  int batch;   /* calls per timed window */
  int64_t* ns; /* rounds entries: this thread's ns per call, or -1 */
} producer_t;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int noop(void* arg) {
  (void)arg;
  atomic_fetch_add_explicit(&g_ran, 1, memory_order_release);
  return 0;
}

static void barrier(int threads, int round) {
  if (atomic_fetch_add(&g_arrived, 1) + 1 == threads * (round + 1)) {
    atomic_store(&g_round, round + 1);
  }
  while (atomic_load(&g_round) <= round) {
    sched_yield(); /* outside the timed window; kind to a small machine */
  }
}

static void* producer(void* p) {
  producer_t* pr = (producer_t*)p;
  for (int r = 0; r < pr->rounds; ++r) {
    barrier(pr->threads, r);
    int refused = 0;
    int64_t t0 = now_ns();
    for (int b = 0; b < pr->batch; ++b) {
      refused += Py_AddPendingCall(noop, NULL) != 0;
    }
    int64_t t1 = now_ns();
    if (refused == 0) {
      pr->ns[r] = (t1 - t0) / pr->batch; /* the clock pair is subtracted later, per call */
    } else {
      atomic_fetch_add(&g_refused, refused);
      pr->ns[r] = -1;
    }
    atomic_fetch_add_explicit(&g_added, pr->batch - refused, memory_order_release);
    /* Wait until every call of this round ran: the next round starts with
       the ring empty of our calls. */
    long want = (long)pr->threads * pr->batch * (r + 1) - atomic_load(&g_refused);
    while (atomic_load_explicit(&g_ran, memory_order_acquire) < want) {
      sched_yield();
    }
  }
  atomic_fetch_sub(&g_live, 1);
  return NULL;
}

static int cmp64(const void* a, const void* b) {
  int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return (x > y) - (x < y);
}

/* The median of n clock pairs on a pthread: the timer's own cost. */
typedef struct {
  int n;
  int64_t median;
} timer_t_;

static void* timer_thread(void* p) {
  timer_t_* t = (timer_t_*)p;
  int64_t* v = malloc(sizeof(int64_t) * (size_t)t->n);
  if (v == NULL) {
    t->median = -1;
    return NULL;
  }
  for (int i = 0; i < t->n; ++i) {
    int64_t t0 = now_ns();
    int64_t t1 = now_ns();
    v[i] = t1 - t0;
  }
  qsort(v, (size_t)t->n, sizeof(int64_t), cmp64);
  t->median = v[t->n / 2];
  free(v);
  return NULL;
}

static int64_t pct(const int64_t* v, size_t n, double q) {
  size_t i = (size_t)(q * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

/* measure(threads: int, rounds: int, batch: int = 1) -> dict
 *   threads: producers racing in each round (1..64); rounds: 1..10**6.
 *   batch: calls each producer makes back to back in one timed window,
 *   threads * batch <= 24 (below the smallest capacity the probe measures);
 *   a window's time is divided by batch.
 *   Returns {"threads", "rounds", "batch", "calls", "refused", "timer_ns",
 *   "median_ns", "p10_ns", "p90_ns", "p99_ns", "mean_ns", "wall_s"}: ns per
 *   accepted call (over the windows without a refusal), timer overhead
 *   subtracted; wall_s the whole run. */
static PyObject* measure(PyObject* self, PyObject* args) {
  (void)self;
  int threads, rounds, batch = 1;
  if (!PyArg_ParseTuple(args, "ii|i", &threads, &rounds, &batch)) {
    return NULL;
  }
  if (threads < 1 || threads > 64 || rounds < 1 || rounds > 1000000 || batch < 1 ||
      threads * batch > 24) {
    PyErr_SetString(PyExc_ValueError,
                    "threads 1..64, rounds 1..10**6, batch >= 1 and threads * batch <= 24");
    return NULL;
  }
  timer_t_ tm = {100000, 0};
  pthread_t tt;
  if (pthread_create(&tt, NULL, timer_thread, &tm) != 0) {
    PyErr_SetString(PyExc_RuntimeError, "pthread_create failed");
    return NULL;
  }
  pthread_join(tt, NULL);
  if (tm.median < 0) {
    return PyErr_NoMemory();
  }
  size_t total = (size_t)threads * (size_t)rounds;
  int64_t* ns = malloc(sizeof(int64_t) * total);
  producer_t* prs = calloc((size_t)threads, sizeof(producer_t));
  pthread_t* tids = calloc((size_t)threads, sizeof(pthread_t));
  if (ns == NULL || prs == NULL || tids == NULL) {
    free(ns);
    free(prs);
    free(tids);
    return PyErr_NoMemory();
  }
  atomic_store(&g_added, 0);
  atomic_store(&g_ran, 0);
  atomic_store(&g_refused, 0);
  atomic_store(&g_arrived, 0);
  atomic_store(&g_round, 0);
  atomic_store(&g_live, threads);
  int64_t w0 = now_ns();
  int started = 0;
  for (int i = 0; i < threads; ++i) {
    prs[i] = (producer_t){i, threads, rounds, batch, ns + (size_t)i * (size_t)rounds};
    if (pthread_create(&tids[i], NULL, producer, &prs[i]) != 0) {
      break;
    }
    ++started;
  }
  if (started < threads) {
    /* The barrier would wait for ever: the started threads are left parked
       and the process must exit; say so. */
    free(prs);
    free(tids);
    free(ns);
    PyErr_SetString(PyExc_RuntimeError, "pthread_create failed: producers left parked");
    return NULL;
  }
  /* The consumer: the main thread runs the calls with the GIL held. */
  while (atomic_load(&g_live) > 0 || atomic_load(&g_ran) < atomic_load(&g_added)) {
    if (atomic_load_explicit(&g_added, memory_order_acquire) >
        atomic_load_explicit(&g_ran, memory_order_acquire)) {
      if (Py_MakePendingCalls() < 0) {
        PyErr_Clear();
      }
    } else {
      sched_yield();
    }
  }
  for (int i = 0; i < threads; ++i) {
    pthread_join(tids[i], NULL);
  }
  double wall_s = (double)(now_ns() - w0) / 1e9;
  size_t n = 0;
  double sum = 0;
  for (size_t i = 0; i < total; ++i) {
    if (ns[i] >= 0) {
      int64_t v = ns[i] - tm.median / batch;
      ns[n++] = v > 0 ? v : 0;
      sum += (double)ns[n - 1];
    }
  }
  PyObject* out;
  if (n == 0) {
    out = Py_BuildValue("{s:i,s:i,s:i,s:n,s:l,s:L,s:d}", "threads", threads, "rounds", rounds,
                        "batch", batch, "calls", (Py_ssize_t)0, "refused", atomic_load(&g_refused),
                        "timer_ns", (long long)tm.median, "wall_s", wall_s);
  } else {
    qsort(ns, n, sizeof(int64_t), cmp64);
    out = Py_BuildValue("{s:i,s:i,s:i,s:n,s:l,s:L,s:L,s:L,s:L,s:L,s:d,s:d}", "threads", threads,
                        "rounds", rounds, "batch", batch, "calls", (Py_ssize_t)n * batch, "refused",
                        atomic_load(&g_refused), "timer_ns", (long long)tm.median, "median_ns",
                        (long long)pct(ns, n, 0.5), "p10_ns", (long long)pct(ns, n, 0.1), "p90_ns",
                        (long long)pct(ns, n, 0.9), "p99_ns", (long long)pct(ns, n, 0.99),
                        "mean_ns", sum / (double)n, "wall_s", wall_s);
  }
  free(prs);
  free(tids);
  free(ns);
  return out;
}

static PyMethodDef methods[] = {
    {"measure", measure, METH_VARARGS,
     "measure(threads, rounds, batch=1) -> dict: ns per Py_AddPendingCall from foreign threads"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_dc_pending_cost", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__dc_pending_cost(void) { return PyModule_Create(&module); }
