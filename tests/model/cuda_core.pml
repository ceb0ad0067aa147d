/*
 * cuda_core.pml: a Promela model of the drain of the cuda-core 1.2 wheel
 * (the project's variant `cuda-core-1.2`, CudaCore12Policy in
 * include/deferred_cleanup/comparison/policies.hpp) and of its minimal fix
 * for the lost wakeup (`cuda-core-1.2-fixed`, CudaCore12FixedPolicy,
 * member sb_fences).  The shape follows cuda-python's
 * cuda_core/cuda/core/_cpp/rt/py_deferred_cleanup.cpp at commit 08f74293:
 * the producer's enqueue-then-schedule path and the pending call's drain
 * (take loop, clear of the scheduled flag, re-check of the list head, a new
 * schedule if the re-check finds work); our C++ has the same steps in
 * drain.hpp (pending_call, DrainShape::take_clear_recheck) and queue.hpp
 * (claim, clear, recheck).
 *
 * It is a file of its own, not a switch of deferred_cleanup.pml: that model
 * is the reference (fast path, in-flight gate, re-arm of a stale claim,
 * clear-then-take, direct drains, exit sequence), and the cuda-core shape
 * has none of these, so a switch would have to turn off nearly all of it.
 *
 * What is modelled, one Promela step per shared access of the code:
 *
 *   producer   a user object's destructor on a driver thread: push its
 *              item onto the intrusive list (head_, a compare-and-swap,
 *              release), then schedule(): one load of head_ (acquire; empty:
 *              return), then the claim, a strong compare-and-swap of the
 *              scheduled flag false -> true (acq_rel, failure relaxed);
 *              the winner adds one pending call.
 *   pq         CPython's pending-call queue, a channel.  Its capacity K
 *              (default 2) is room for every call of ours that can be
 *              outstanding, and no foreign caller competes, so
 *              Py_AddPendingCall never refuses here: a refusal (the claim
 *              given back, left to the next push or entry point) is not the
 *              hole this model is about.
 *   main       the CPython main thread: it runs our queued pending call
 *              (the drain: take the whole list until empty, run it, clear
 *              the flag with a release store, re-check head_ with an
 *              acquire load and call schedule() if the list is not empty),
 *              and may reach up to ENTRIES API entry points, where
 *              cuda-core calls schedule() (DrainShape's variants never drain
 *              at an entry point: drain.hpp).  It runs for ever, as a
 *              program that keeps running Python code does.
 *
 * The memory order.  Promela executes statements one at a time in a single
 * global order, so a model is sequentially consistent; deferred_cleanup.pml
 * shows what weaker orders allow as negative variants that move an access
 * across another (LOST_WAKEUP, FAST_REORDERED).  Here likewise: the drain
 * tail's release store of the flag and the acquire load of head_ after it
 * are a store-buffering pair, and neither C++ (the release store and the
 * acquire load need not be ordered: C++20 [atomics.order]) nor x86-64 (a
 * store waits in the store buffer while a later load reads memory; the
 * wheel's machine code is `movb $0` then `mov` with no fence,
 * notes/upstream/cuda-core-store-buffering.md) keeps the load after the
 * store.  In the shipped shape (-DCC_SHIPPED) the drain therefore makes its
 * re-check load either after its clear or before it, a nondeterministic
 * choice: the load taking effect first is the store-buffering outcome.
 * With -DCC_FIXED (the sb_fences fix: a seq_cst fence between the clear
 * and the re-check, and one between a producer's push and its claim) both
 * pairs are ordered and the model keeps program order.
 * Only the drain's side is reordered: the producer's side (its push made
 * visible after its claim reads the flag) is allowed by C++ but not by
 * x86-64, where the claim is a `lock cmpxchg`, a full barrier; one reordered
 * side is enough for the counterexample.  That the fix needs both fences in
 * the C++ memory model (either alone still allows the lost outcome) is
 * what herd7 shows: tests/litmus/wakeup_recheck_sb_fixed.litmus and
 * tests/litmus/ (tools/litmus7.sh runs them on this CPU).
 *
 * Items are interchangeable, so head_ is a count (nq), as in
 * deferred_cleanup.pml.
 *
 * Out of the model's scope, because neither is an ordering bug of the drain
 * tail and the fix of this model does not touch them:
 *   - the exit release (no release at exit: graphs destroyed on a script's
 *     last line are never cleaned) is shown by scenario X on the H200
 *     (notes/upstream/cuda-core-exit-release.md, notes/upstream/results)
 *     and tests/test_exit.py;
 *   - the finalization gate (the check-then-act between the finalizing test
 *     and Py_AddPendingCall) is shown by tests/test_shutdown.py and
 *     notes/upstream/cuda-core-finalization.md; deferred_cleanup.pml's
 *     negative variant NO_GATE shows the same window for the reference's
 *     gate.
 * The model has no finalization at all: the interpreter runs for ever.
 *
 * Compile-time knobs (spin -D...):
 *   N          producers, one item each (default 2)
 *   K          capacity of the pending-call queue (default 2)
 *   ENTRIES    main-thread API entry points that call schedule() (default 1)
 *   CC_SHIPPED the shipped drain tail (cuda-core-1.2): its re-check may
 *              take effect before its clear
 *   CC_FIXED   the minimal fix (cuda-core-1.2-fixed): the drain tail in
 *              program order
 *              (exactly one of the two: each check names the shape it runs)
 *   LIVENESS   compile the ltl claim `drained`
 *   WITNESS=k  one behaviour the model must reach (spin must find the
 *              assertion; tests/test_model.py):
 *                1  the re-check finds an item and schedules a new call
 *                2  every item is cleaned
 *
 * Properties:
 *   safety     never more cleanups than items; at most one of our pending
 *              calls queued (one claim at a time).
 *   liveness   `drained`: an item on the list is eventually taken (weak
 *              fairness, pan -a -f).  The shipped shape must fail it (an
 *              item pushed while the drain's clear sits in the store buffer
 *              finds the flag still set and the re-check finds the list
 *              empty: no pending call, and nothing schedules one unless
 *              another push or entry point comes); CC_FIXED must verify it.
 */

#ifndef N
#define N 2
#endif
#ifndef K
#define K 2
#endif
#ifndef ENTRIES
#define ENTRIES 1
#endif
#ifndef WITNESS
#define WITNESS 0
#endif
#if defined(CC_SHIPPED) == defined(CC_FIXED)
#error "define exactly one of CC_SHIPPED and CC_FIXED"
#endif
#define WITNESS_HIT(k, cond) assert(!(WITNESS == k && (cond)))

chan pq = [K] of { bit };   /* our pending calls */

byte nq = 0;          /* items on the list (head_) */
bool scheduled = 0;   /* the scheduled flag */

/* Ghost state. */
byte pushed = 0;      /* items pushed */
byte cleaned = 0;     /* cleanups run */
byte ours_out = 0;    /* our pending calls queued, not yet started */

/* schedule(): head_ load (empty: return), claim by compare-and-swap, the
 * winner adds a pending call (never refused here: see the header). */
inline schedule() {
  if
  :: nq == 0 -> skip                      /* head_.load(acquire): empty */
  :: else ->
     if
     :: atomic { !scheduled -> scheduled = 1 };   /* claim won */
        atomic {
          ours_out++;
          assert(ours_out <= 1);          /* one claim, one call */
          pq ! 1
        }
     :: atomic { scheduled -> skip }      /* claim lost: someone holds it */
     fi
  fi
}

proctype producer() {
  atomic { nq++; pushed++ };             /* push (CAS on head_, release) */
  schedule()
}

/* The pending call: take until empty and run, clear, re-check. */
inline drain() {
  bool r;
  do
  :: nq > 0 -> atomic { cleaned = cleaned + nq; nq = 0 };  /* take_all, run */
     assert(cleaned <= pushed);
     WITNESS_HIT(2, cleaned == N)
  :: else -> break
  od;
#ifdef CC_FIXED
  scheduled = 0;                          /* clear (release) */
  r = (nq > 0);                           /* fence, then re-check (acquire) */
#else
  if
  :: scheduled = 0; r = (nq > 0)          /* the store visible first */
  :: r = (nq > 0); scheduled = 0          /* store buffering: the load first */
  fi;
#endif
  if
  :: r -> WITNESS_HIT(1, true); schedule()
  :: else -> skip
  fi;
  r = 0
}

proctype main_thread() {
  byte entries = 0;
end:
  do
  :: pq ? 1 -> ours_out--; drain()
  :: entries < ENTRIES -> entries++; schedule()   /* an API entry point */
  od
}

init {
  byte p;
  atomic {
    p = 0;
    do
    :: p < N -> run producer(); p++
    :: else -> break
    od;
    run main_thread()
  }
}

/* Liveness, with weak fairness (pan -a -f): an item on the list is
 * eventually taken.  Stated on nq because items are interchangeable. */
#ifdef LIVENESS
ltl drained { [] ((nq > 0) -> <> (nq == 0)) }
#endif
