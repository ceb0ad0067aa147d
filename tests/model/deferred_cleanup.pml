/*
 * deferred_cleanup.pml: a Promela model of the deferred-cleanup protocol.
 *
 * What is modelled (reference/include/deferred_cleanup/*.hpp):
 *
 *   producer     a user object's destructor on a driver thread with no thread
 *                state (callback.hpp): push its item onto head_, then
 *                try_schedule: gate_enter (in_flight_++, check accepting_),
 *                claim scheduled_ (false -> true), Py_AddPendingCall, on -1
 *                give the claim back, gate_leave.  A producer may run at any
 *                time, also during and after shutdown (a late callback).
 *   pq           CPython's pending-call queue, a channel of capacity K shared
 *                with other users of Py_AddPendingCall (the foreign process);
 *                Py_AddPendingCall refuses (-1) when it is full and evicts
 *                nothing (Python/ceval_gil.c, _push_pending_call, v3.12.0;
 *                measured by the probe: cpython_facts.py).
 *   main         the CPython main thread.  It runs queued pending calls (the
 *                eval breaker), may hit API entry points (drain_at_entry: a
 *                direct drain when the queue is non-empty, gh-95820), may run
 *                Python code for ever, or exits: the atexit hook closes the
 *                gate, waits out the producers inside it, drains a last time
 *                and marks the host dead; finalization may still run queued
 *                pending calls (no-ops by then); teardown.
 *   retrier      a non-main Python thread hitting entry points: it can only
 *                retry scheduling (drain.hpp, drain_at_entry off the main
 *                thread; scheduling.hpp, retry_schedule).
 *
 * Items are interchangeable for every property checked here, so head_ is a
 * count (nq) and exactly-once is checked by counting: no cleanup beyond the
 * items pushed (a second cleanup of one item), and at the end cleaned plus
 * leaked equals the items pushed (no item lost).  Order in head_ does not
 * matter to these properties.
 *
 * Promela executes statements one at a time in a single global order, i.e.
 * the model is sequentially consistent.  It checks the protocol's logic; the
 * memory-model side (that the seq_cst orders really give this SC behaviour
 * for the two store-buffering pairs) is what tests/litmus/ checks with herd7.
 * The seed's lost wakeup under acquire/release is the interleaving that
 * LOST_WAKEUP below permits (the clear taking effect after the last take),
 * which is how that bug looks to a sequentially consistent observer.
 *
 * Compile-time knobs (spin -D...):
 *   N              producers, one item each (default 3)
 *   K              capacity of the pending-call queue (default 1)
 *   FOREIGN        foreign pending calls that compete for it (default K)
 *   ENTRIES        main-thread entry points (default 1)
 * Negative variants; spin must find a counterexample for each:
 *   LOST_WAKEUP    the pending call drains first and clears scheduled_ after
 *                  the drain, with no recheck (liveness: an item stranded);
 *   NO_GATE        no in-flight gate: producers only check accepting_, and
 *                  shutdown does not wait (a pending call after teardown);
 *   RETRY_ENQUEUES a retry pushes the refused item again (cleaned twice).
 * Witnesses (-DWITNESS=k, 1..8): one behaviour each that the verified model
 * must be able to reach; spin must find the assertion that marks it, which
 * shows the model is not vacuous (see WITNESS_HIT below and test_model.py).
 *
 * Properties:
 *   safety     assertions: no pending call added and no cleanup after
 *              teardown; no cleanup after the host died; never more cleanups
 *              than items; at most one of our pending calls outstanding; at
 *              the end every item cleaned once or leaked.  pan also reports
 *              invalid end states (a shutdown that waits for ever).
 *   liveness   the ltl claim `drained` at the end of this file, with weak
 *              fairness (pan -a -f), compiled with -DLIVENESS.
 *
 * Assumptions of the liveness check: the main thread runs a queued pending
 * call before it runs Python code again ("Python code" is only enabled when
 * pq is empty).  That is CPython's eval breaker on 3.13+; on 3.10-3.12 a call
 * added from a thread with no thread state can starve while the main thread
 * stays in pure Python (gh-95820), which the reference answers with the direct
 * drain at entry points (tests/test_drain.py measures that delay; it is
 * outside this model).  Entry points are finitely many (ENTRIES, and one on
 * the retrier), so liveness never relies on one coming; a refusal is the one
 * case where the design waits for the next enqueue or entry point, and the
 * claim excuses exactly that case (the ghost `owed`).
 */

#ifndef N
#define N 3
#endif
#ifndef K
#define K 1
#endif
#ifndef FOREIGN
#define FOREIGN K
#endif
#ifndef ENTRIES
#define ENTRIES 1
#endif
#ifndef WITNESS
#define WITNESS 0
#endif
#define WITNESS_HIT(k, cond) assert(!(WITNESS == k && (cond)))

/* Interpreter phases. */
#define RUNNING    0   /* before the atexit hook */
#define EXITING    1   /* atexit hook and finalization; interpreter alive */
#define TORN_DOWN  2   /* after Py_FinalizeEx: no CPython call may happen */

mtype = { OURS, OTHER };
chan pq = [K] of { mtype };

/* The queue's shared state (queue.hpp). */
byte nq = 0;          /* items in head_ */
bool scheduled = 0;   /* scheduled_ */
bool accepting = 1;   /* accepting_ */
byte in_flight = 0;   /* in_flight_ */
bool alive = 1;       /* alive_ (mark_host_dead) */

/* The interpreter. */
byte interp = RUNNING;

/* Ghost state for the properties. */
byte pushed = 0;      /* items pushed by producers (each pushes one, once) */
byte cleaned = 0;     /* cleanups run */
byte leaked = 0;      /* items counted as leaked at the end */
byte ours_out = 0;    /* our pending calls queued in pq, not yet started */
bool owed = 0;        /* a refused claimant gave scheduled_ back; since then no
                         pending call was added and no entry point drained */
byte batches = 0;     /* non-empty takes within the current drain_all */
byte done = 0;        /* producers and helper threads that finished */

/* Run one cleanup: on the main thread, interpreter alive.  Items are pushed
 * once each, so a cleanup beyond the number pushed is an item cleaned twice. */
inline clean() {
  assert(interp != TORN_DOWN);          /* no cleanup after teardown */
  assert(alive);
  cleaned++;
  assert(cleaned <= pushed)             /* never more cleanups than items */
}

/* drain_all: take the whole list and run its cleanups, until a take comes
 * back empty.  Cleanups touch only main-thread and ghost state, so each take
 * and the cleanups of what it took form one indivisible step: producers
 * interleave before and after every take, which is what the properties
 * depend on.  The main thread's re-entrancy flag is not modelled: cleanups
 * here run no Python code. */
inline drain_all() {
  if
  :: alive ->
     do
     :: d_step {
          nq > 0 ->                       /* take_all: [litmus:wakeup.take] */
          batches++;
          WITNESS_HIT(3, batches == 2);   /* items arrived while draining */
          do
          :: nq > 0 -> nq--; clean()
          :: else -> break
          od
        }
     :: d_step { nq == 0 -> batches = 0 };   /* the take came back empty */
        break
     od
  :: else -> skip
  fi
}

/* The main thread takes the oldest pending call.  CPython pops it under its
 * lock and then calls it; the pending call's first act is to clear
 * scheduled_ (drain.hpp, pending_call: clear, then take).  Pop and clear are
 * one step here: a producer that acts between them sees scheduled_ set and
 * does exactly what it would do just before the pop. */
inline run_pending_call() {
  atomic {
    pq?m;
    if
    :: m == OURS ->
       ours_out--;
       if
       :: !alive -> WITNESS_HIT(7, true)  /* after the host died: a no-op */
#ifndef LOST_WAKEUP
       :: alive -> scheduled = 0          /* [litmus:wakeup.clear]: before the take */
#else
       :: alive -> skip
#endif
       fi
    :: else -> skip                       /* a foreign pending call */
    fi
  };
  if
  :: m == OURS && alive ->
     drain_all();
#ifdef LOST_WAKEUP
     scheduled = 0;                       /* seed-like: clear after the drain, no recheck */
#endif
     skip
  :: else -> skip
  fi;
  m = 0
}

/* Leave the gate and finish (gate_leave, then the process ends). */
#ifndef NO_GATE
#define GATE_LEAVE in_flight--;           /* gate_leave */
#else
#define GATE_LEAVE skip;
#endif

/* scheduling.hpp, try_schedule, then gate_leave.
 *
 * Reduction (Lipton's movers, sequentially consistent model): in_flight++
 * is a right mover and in_flight-- a left mover, since the only statement
 * that reads in_flight is shutdown's wait for zero, which an increment can
 * only disable and a decrement only enable.  So gate_enter's increment is
 * merged with the accepting_ check after it, and gate_leave with the step
 * before it.  Every other shared access (the check, the claim of scheduled_,
 * Py_AddPendingCall, the give-back) is a step of its own.  The store-buffering
 * side of the gate, which an SC model cannot show, is tests/litmus/. */
inline try_schedule() {
  atomic {
#ifndef NO_GATE
    in_flight++;                          /* [litmus:gate.enter] */
#endif
    ok = accepting                        /* [litmus:gate.check] */
  };
  if
  :: ok ->
     atomic {
       old = scheduled; scheduled = 1;    /* [litmus:wakeup.check] */
       if
       :: old -> GATE_LEAVE done++        /* already scheduled */
       :: else -> skip
       fi
     };
     if
     :: !old ->
        atomic {                          /* Py_AddPendingCall */
          assert(interp != TORN_DOWN);    /* no pending call added after teardown */
          if
          :: len(pq) < K ->
             pq!OURS; ours_out++; owed = 0;
             assert(ours_out <= 1);       /* at most one outstanding pending call */
             rc = 0;
             GATE_LEAVE done++
          :: else ->
             rc = 1;
             WITNESS_HIT(1, true)         /* Py_AddPendingCall refused */
          fi
        };
        if
        :: rc != 0 ->                     /* refused: give the claim back */
           atomic { scheduled = 0; owed = 1; GATE_LEAVE done++ }  /* owed: the items wait for a retry */
        :: else -> skip
        fi
     :: else -> skip
     fi
  :: else ->
     atomic {
       WITNESS_HIT(2, interp == TORN_DOWN);  /* a late callback after teardown backs out */
       GATE_LEAVE done++
     }
  fi;
  old = 0; rc = 0; ok = 0
}

proctype producer() {
  bool old, ok; byte rc;
  atomic { nq++; pushed++ };            /* [litmus:wakeup.push] */
  try_schedule()                          /* counts the producer in done */
}

/* Another Python thread at API entry points: retry_schedule only. */
proctype retrier() {
  bool old, ok; byte rc;
  if
  :: interp == RUNNING ->
#ifdef RETRY_ENQUEUES
     /* the bug: the retry pushes the refused item once more */
     atomic {
       if
       :: owed && pushed > 0 -> nq++    /* the refused item, once more */
       :: else -> skip
       fi
     };
#endif
     if
     :: nq > 0 && !scheduled ->           /* retry_schedule's snapshots */
        try_schedule()                    /* counts the retrier in done */
     :: else -> done++
     fi
  :: done++                               /* no entry point on this thread */
  fi
}

/* Other users of Py_AddPendingCall (signal handling, other extensions). */
proctype foreign() {
  byte left = FOREIGN;
  do
  :: atomic { left > 0 && interp == RUNNING && len(pq) < K -> pq!OTHER; left-- }
  :: left == 0 || interp != RUNNING -> break
  od;
  done++
}

proctype main_thread() {
  mtype m; byte entries = ENTRIES;
  do
  :: len(pq) > 0 -> run_pending_call()    /* the eval breaker */
  :: atomic { entries > 0 && nq > 0 && alive ->  /* an API entry point (drain_at_entry) */
       entries--; owed = 0 };
     WITNESS_HIT(4, true);
     drain_all()                          /* gh-95820: drain directly */
  :: len(pq) == 0 -> skip                 /* Python code; nothing to run */
  :: break                                /* the interpreter exits */
  od;

  /* The atexit hook (shutdown.hpp, shutdown_at_exit). */
  atomic { interp = EXITING; accepting = 0 };  /* [litmus:gate.close] */
#ifndef NO_GATE
  WITNESS_HIT(5, in_flight > 0);          /* a producer is waited out */
  in_flight == 0;                         /* [litmus:gate.wait] */
#endif
  drain_all();                            /* final drain, interpreter alive */
  alive = 0;                              /* mark_host_dead */

  /* Finalization may still run what is queued; then teardown. */
  do
  :: len(pq) > 0 -> run_pending_call()
  :: break
  od;
  interp = TORN_DOWN;

  /* Late callbacks may still come; wait for every thread, then account. */
  done == N + 2;
  d_step {
    leaked = nq;                          /* still queued: leaked on purpose */
    assert(pushed == N);
    assert(cleaned + leaked == N)         /* each item cleaned once, or leaked */
  };
  WITNESS_HIT(6, leaked > 0);             /* something was leaked */
  WITNESS_HIT(8, leaked == 0)             /* everything was cleaned */
}

init {
  byte p;
  atomic {
    p = 0;
    do
    :: p < N -> run producer(); p++
    :: else -> break
    od;
    run retrier();
    run foreign();
    run main_thread()
  }
}

/* Liveness, checked with weak fairness (pan -a -f): while the interpreter
 * runs, an item in head_ is eventually taken, unless a refusal left it to the
 * next entry point (owed).  Stated on nq because items are interchangeable
 * for this property and each one is pushed once. */
#ifdef LIVENESS
ltl drained { [] ((nq > 0 && interp == RUNNING) -> <> (nq == 0 || interp != RUNNING || owed)) }
#endif
