/*
 * deferred_cleanup.pml: a Promela model of the reference's deferred-cleanup
 * protocol (ReferencePolicy in reference/include/deferred_cleanup/policy.hpp).
 *
 * What is modelled (reference/include/deferred_cleanup/*.hpp):
 *
 *   producer     a user object's destructor on a driver thread with no thread
 *                state (callback.hpp, on_user_object_destroyed): push its item
 *                onto head_, then one load of scheduled_ (the fast path).  If
 *                it reads true the producer returns, after, on a sampled hit
 *                (about one in 16 in the code, any hit here), looking for a
 *                stale claim (rearm_if_stale).  Otherwise the slow path
 *                (scheduling.hpp, schedule): gate_enter (in_flight_++, check
 *                accepting_), claim scheduled_ (an exchange), take a call
 *                token (the next sequence number, which becomes the claim's
 *                call, claim_seq_), Py_AddPendingCall with the token, on -1
 *                give the claim back, gate_leave.  A producer may
 *                run at any time, also during and after shutdown.
 *   pq           CPython's pending-call queue, a channel of capacity K shared
 *                with other users of Py_AddPendingCall (the foreign process);
 *                Py_AddPendingCall refuses (-1) when it is full and evicts
 *                nothing (Python/ceval_gil.c, _push_pending_call, v3.12.0;
 *                measured by the probe: cpython_facts.py).
 *   lost calls   the host may accept one of our calls (return 0) and never
 *                run it, at most LOST times: on 3.10 and 3.11 a call added
 *                while a subinterpreter holds the GIL goes to that
 *                interpreter (the probe's field subinterp.runner).
 *   re-arm       rearm_if_stale (scheduling.hpp): when the outstanding claim
 *                is older than the stale bound, a producer on a fast-path hit
 *                or an entry point adds a second pending call, which becomes
 *                the claim's call: it takes superseded_ 0 -> 1, a new token
 *                and claim_seq_, behind the gate; scheduled_ is untouched.
 *                A pending call whose sequence number is the claim's (or
 *                newer) resets superseded_ and clears scheduled_ before its
 *                take; an older one only lowers superseded_ and drains
 *                (queue.hpp, call_ran; drain.hpp, pending_call).  Tokens
 *                live in KT reused slots, as in the code (kTokens = 4).  Time is not modelled: "the claim is stale" is
 *                a nondeterministic choice, open while scheduled_ is set.
 *   main         the CPython main thread.  It runs queued pending calls (the
 *                eval breaker): count the call as run, clear scheduled_, then
 *                take until empty (drain.hpp, pending_call; clear_then_take).
 *                It may hit API entry points (drain_at_entry: a direct drain
 *                when the queue is non-empty, gh-95820, then a stale-claim
 *                check), may run Python code for ever, or exits: the exit
 *                hook closes the gate, waits out the producers inside it,
 *                drains a last time and marks the host dead (shutdown.hpp);
 *                finalization may still run queued pending calls (no-ops by
 *                then); teardown.
 *   retrier      a non-main Python thread at an entry point: it can only
 *                retry scheduling or look for a stale claim (drain.hpp,
 *                drain_at_entry off the main thread; scheduling.hpp,
 *                retry_schedule).
 *
 * Items are interchangeable for every property checked here, so head_ is a
 * count (nq) and exactly-once is checked by counting: no cleanup beyond the
 * items pushed (a second cleanup of one item), and at the end cleaned plus
 * leaked equals the items pushed (no item lost).
 *
 * Promela executes statements one at a time in a single global order, i.e.
 * the model is sequentially consistent.  It checks the protocol's logic; the
 * memory-model side (that the seq_cst orders really give this SC behaviour
 * for the store-buffering pairs) is what tests/litmus/ checks with herd7.
 * What acquire/release would allow shows here as two negative variants:
 * LOST_WAKEUP (the drain's clear takes effect after its last take) and
 * FAST_REORDERED (the fast-path load takes effect before the push).
 *
 * Compile-time knobs (spin -D...):
 *   N              producers, one item each (default 3)
 *   K              capacity of the pending-call queue (default 1)
 *   FOREIGN        foreign pending calls that compete for it (default K)
 *   ENTRIES        main-thread entry points (default 1)
 *   LOST           pending calls the host may lose (default 0)
 *   KT             call-token slots (default 4, queue.hpp kTokens)
 *   LOST_APART     the second lost call (LOST=2) only after a re-armed call
 *                  ran and drained: two losses far apart in time
 * Negative variants; spin must find a counterexample for each:
 *   LOST_WAKEUP    the pending call takes first and clears scheduled_ after
 *                  the drain, with no re-check (liveness: an item stranded);
 *   FAST_REORDERED the fast-path load of scheduled_ before the push, as the
 *                  store buffering of acquire/release allows (liveness);
 *   NO_GATE        no in-flight gate: producers only check accepting_, and
 *                  shutdown does not wait (a pending call after teardown);
 *   RETRY_ENQUEUES a retry pushes the refused item again (cleaned twice);
 *   NO_REARM       a stale claim is never re-armed: with LOST >= 1 a lost
 *                  call leaves scheduled_ set for good (liveness).
 * Witnesses (-DWITNESS=k, 1..12): one behaviour each that the verified model
 * must be able to reach; spin must find the assertion that marks it, which
 * shows the model is not vacuous (see WITNESS_HIT below and test_model.py).
 *
 * Properties:
 *   safety     assertions: no pending call added and no cleanup after
 *              teardown; no cleanup after the host died; never more cleanups
 *              than items; at most two of our pending calls outstanding, and
 *              at most one unless a stale claim was re-armed; at the end
 *              every item cleaned once or leaked.  pan also reports invalid
 *              end states (a shutdown that waits for ever).
 *   liveness   the ltl claim `drained` at the end of this file, with weak
 *              fairness (pan -a -f), compiled with -DLIVENESS.
 *
 * Assumptions of the liveness check: the main thread runs a queued pending
 * call before it runs Python code again ("Python code" is only enabled when
 * pq is empty).  That is CPython's eval breaker on 3.13+; on 3.10-3.12 a call
 * added from a thread with no thread state can starve while the main thread
 * stays in pure Python (gh-95820), which the reference answers with the direct
 * drain at entry points (tests/test_drain.py measures that delay; it is
 * outside this model).  Entry points and producers are finitely many, so
 * liveness never relies on one coming.  Two cases wait for one by design, and
 * the claim excuses exactly those: a refusal leaves the items to the next
 * enqueue or entry point (the ghost `owed`), and a lost call leaves them to
 * the next chance to re-arm, i.e. a producer's sampled fast-path hit or an
 * entry point that finds the claim stale while none of our calls is queued
 * (the ghost `down`: set when a call is lost, cleared at such a chance,
 * whatever the re-arm then does; a queued call runs first and may clear
 * scheduled_ itself or free the superseded slot for the next chance).
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
#ifndef LOST
#define LOST 0
#endif
#ifndef KT
#define KT 4
#endif
#ifndef WITNESS
#define WITNESS 0
#endif
#ifdef LOST_APART
/* A second call may be lost only after a re-armed call ran and drained. */
#define LOSS_ALLOWED (lost == 0 || recovered)
#else
#define LOSS_ALLOWED true
#endif
#define WITNESS_HIT(k, cond) assert(!(WITNESS == k && (cond)))

/* Interpreter phases. */
#define RUNNING    0   /* before the exit hook */
#define EXITING    1   /* exit hook and finalization; interpreter alive */
#define TORN_DOWN  2   /* after Py_FinalizeEx: no CPython call may happen */

mtype = { OURS, OTHER };
chan pq = [K] of { mtype, byte };   /* the function, and our token's slot */

/* The queue's shared state (queue.hpp). */
byte nq = 0;          /* items in head_ */
bool scheduled = 0;   /* scheduled_ */
bool accepting = 1;   /* accepting_ */
byte in_flight = 0;   /* in_flight_ */
bool alive = 1;       /* alive_ (mark_host_dead) */
byte next_seq = 0;    /* next_seq_: sequence numbers taken */
byte claim_seq = 0;   /* claim_seq_: the claim's call */
byte superseded = 0;  /* superseded_ */
byte tok[KT];         /* tokens_[i].seq */

/* The interpreter. */
byte interp = RUNNING;

/* Ghost state for the properties. */
byte pushed = 0;      /* items pushed by producers (each pushes one, once) */
byte cleaned = 0;     /* cleanups run */
byte leaked = 0;      /* items counted as leaked at the end */
byte ours_out = 0;    /* our pending calls queued in pq, not yet started */
byte lost = 0;        /* our pending calls the host lost */
bool rearmed = 0;     /* a second pending call was added by a re-arm */
#if defined(LIVENESS) || defined(RETRY_ENQUEUES)
bool owed = 0;        /* a refused claimant gave scheduled_ back; since then no
                         pending call was added and no entry point drained */
bool down = 0;        /* a call was lost (or a re-arm refused); since then no
                         chance to re-arm came while none of our calls was
                         queued */
#define OWED(v) owed = v
#define DOWN(v) down = v
/* A chance to re-arm that the rule must use: none of our calls is queued
 * (a queued one runs first and may still clear scheduled_ or free the
 * superseded slot). */
#define CHANCE if :: ours_out == 0 -> down = 0 :: else -> skip fi
#else
/* Ghosts of the liveness claim (and of RETRY_ENQUEUES's bug) only: left out
 * of the safety state space. */
#define OWED(v) skip
#define DOWN(v) skip
#define CHANCE skip
#endif
byte batches = 0;     /* non-empty takes within the current drain_all */
byte done = 0;        /* producers and helper threads that finished */
bool recovered = 0;   /* one of our calls ran after a loss and a re-arm */

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
 * depend on.  The re-entrancy flag is not modelled: cleanups here run no
 * Python code. */
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
 * lock and then calls it; pending_call counts it as run (call_gone), forgets
 * the claim time and clears scheduled_, before the take (clear_then_take).
 * Pop and clear are one step here: a producer that acts between them sees
 * scheduled_ set and does exactly what it would do just before the pop. */
inline run_pending_call() {
  atomic {
    pq?m,slot;
    if
    :: m == OURS ->
       ours_out--;
       if                                 /* call_ran(tokens_[slot].seq) */
       :: tok[slot] >= claim_seq -> current = 1; superseded = 0
       :: else -> current = 0;
          if :: superseded > 0 -> superseded-- :: else -> skip fi
       fi;
       if
       :: !alive -> WITNESS_HIT(7, true)  /* after the host died: a no-op */
       :: alive && !current -> skip       /* superseded: only drains */
#ifndef LOST_WAKEUP
       :: alive && current ->
          WITNESS_HIT(12, lost > 0 && rearmed && scheduled);  /* recovered */
          recovered = (recovered || (lost > 0 && rearmed));
          scheduled = 0                   /* [litmus:wakeup.clear]: before the take */
#else
       :: alive && current -> skip
#endif
       fi
    :: else -> skip                       /* a foreign pending call */
    fi
  };
  if
  :: m == OURS && alive ->
     drain_all();
#ifdef LOST_WAKEUP
     if :: current -> scheduled = 0 :: else -> skip fi;  /* take, then clear */
#endif
     skip
  :: else -> skip
  fi;
  m = 0; slot = 0; current = 0
}

/* Leave the gate (gate_leave). */
#ifndef NO_GATE
#define GATE_LEAVE in_flight--;
#define GATE_ENTER in_flight++;
#else
#define GATE_LEAVE skip;
#define GATE_ENTER skip;
#endif

/* add_call, first half: take a token (new_call_token) and make it the
 * claim's call (set_claim_seq), remembering the old claim_seq_. */
inline new_token() {
  atomic {
    next_seq++; tok[next_seq % KT] = next_seq;
    oldseq = claim_seq; claim_seq = next_seq
  }
}

/* add_call, second half: Py_AddPendingCall with the token, inside the
 * gate.  The host accepts the call, loses it, or refuses it.  rc = 0
 * accepted (or lost), 1 refused. */
inline host_call(second) {   /* second: a re-arm's call (for reading) */
  assert(interp != TORN_DOWN);            /* no pending call added after teardown */
  if
  :: len(pq) < K ->
     pq!OURS,(next_seq % KT); ours_out++; OWED(0); rc = 0;
     assert(ours_out <= 2);               /* at most two outstanding pending calls */
     assert(ours_out <= 1 || rearmed)     /* and one unless a stale claim was re-armed */
  :: lost < LOST && LOSS_ALLOWED ->       /* accepted, never run */
     lost++; DOWN(1); rc = 0;
     WITNESS_HIT(11, true)
  :: len(pq) == K ->
     rc = 1;                              /* refused */
     WITNESS_HIT(1, true)
  fi
}

/* scheduling.hpp, schedule, then gate_leave; the caller counts itself done.
 *
 * Reduction (Lipton's movers, sequentially consistent model): in_flight++ is
 * a right mover and in_flight-- a left mover, since the only statement that
 * reads in_flight is shutdown's wait for zero, which an increment can only
 * disable and a decrement only enable.  So gate_enter's increment is merged
 * with the accepting_ check after it, and gate_leave with the step before
 * it.  Every other shared access (the claim, Py_AddPendingCall, the
 * give-back) is a step of its own.  The store-buffering side of the gate,
 * which an SC model cannot show, is tests/litmus/. */
inline schedule() {
  atomic {
    GATE_ENTER                            /* [litmus:gate.enter] */
    ok = accepting                        /* [litmus:gate.check] */
  };
  if
  :: ok ->
     atomic {
       old = scheduled; scheduled = 1;    /* [litmus:wakeup.claim] */
       if
       :: old -> GATE_LEAVE skip          /* already scheduled */
       :: else -> skip                    /* and set_claimed_at(now) */
       fi
     };
     if
     :: !old ->
        new_token();
        atomic { host_call(0); if :: rc == 0 -> GATE_LEAVE skip :: else -> skip fi };
        if
        :: rc != 0 ->                     /* refused: give the claim back */
           atomic { scheduled = 0; OWED(1); GATE_LEAVE skip }
        :: else -> skip
        fi
     :: else -> skip
     fi
  :: else ->
     atomic {
       WITNESS_HIT(2, interp == TORN_DOWN);  /* a late callback backs out */
       GATE_LEAVE skip
     }
  fi;
  old = 0; rc = 0; ok = 0
}

/* scheduling.hpp, rearm_if_stale, entered by a caller that has just read
 * scheduled_ set (a producer's fast-path hit, an entry point's snapshot).
 * The stale choice stands for "now - claimed_at >= stale bound, and this
 * caller won take_stale_claim"; claimed_at_ns_ is set with the claim and
 * cleared with the drain's clear (or a refusal's give-back), so in this
 * model it is non-zero exactly while scheduled_ is set.
 *
 * Reduction: the caller's read of scheduled_, the stale choice, the
 * scheduled_ snapshot, the CAS 1 -> 2 and gate_enter's increment and check
 * are one step.  The increment is a right mover (above).  The reads of
 * scheduled_ return true at both ends of the step in the code, or the
 * re-arm gives up (got = 0), which is the "not stale" branch.  A close that
 * comes between the CAS and the gate check in the code gives the same
 * outcome as a close just before this step (the check fails and the count
 * is given back), which the model reaches. */
inline rearm_step() {
  CHANCE;                                 /* a chance to re-arm */
  WITNESS_HIT(9, lost > 0);
#ifndef NO_REARM
  if
  :: superseded == 0 ->                   /* take_supersede */
     superseded = 1; GATE_ENTER ok = accepting; got = 1
  :: else -> got = 0
  fi
#endif
}

inline rearm_rest() {
  if
  :: got && ok ->
     rearmed = 1;
     new_token();
     atomic {
       host_call(1);
       if
       :: rc != 0 ->                      /* refused: the old call is the claim's again */
          claim_seq = oldseq; superseded = 0; DOWN(lost > 0)
       :: else -> WITNESS_HIT(10, ours_out == 2)  /* two of our calls queued */
       fi;
       GATE_LEAVE skip
     }
  :: got && !ok -> atomic { superseded = 0; GATE_LEAVE skip }  /* closed: release_supersede */
  :: else -> skip
  fi;
  got = 0; ok = 0; rc = 0; oldseq = 0
}

proctype producer() {
  bool old, ok, got; byte rc, oldseq;
#ifndef FAST_REORDERED
  atomic { nq++; pushed++ };              /* [litmus:wakeup.push] */
  if
  :: atomic { scheduled -> rearm_step() }; /* [litmus:wakeup.check]: fast path, */
     rearm_rest()                         /* sampled, and the claim is stale */
  :: scheduled -> skip                    /* fast path */
  :: else -> schedule()                   /* slow path */
  fi;
#else
  if                                      /* the load before the push */
  :: scheduled -> atomic { nq++; pushed++ }  /* and returns */
  :: else -> atomic { nq++; pushed++ }; schedule()
  fi;
#endif
  done++
}

/* Another Python thread at API entry points: retry_schedule only. */
proctype retrier() {
  bool old, ok, got; byte rc, oldseq;
  if
  :: interp == RUNNING && alive ->
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
     :: nq == 0 -> skip                   /* empty_snapshot */
     :: atomic { nq > 0 && scheduled -> rearm_step() }; rearm_rest()  /* stale */
     :: nq > 0 && scheduled -> skip       /* not stale */
     :: nq > 0 && !scheduled -> schedule()
     fi
  :: skip                                 /* no entry point on this thread */
  fi;
  done++
}

/* Other users of Py_AddPendingCall (signal handling, other extensions). */
proctype foreign() {
  byte left = FOREIGN;
  do
  :: atomic { left > 0 && interp == RUNNING && len(pq) < K -> pq!OTHER,0; left-- }
  :: left == 0 || interp != RUNNING -> break
  od;
  done++
}

proctype main_thread() {
  mtype m; byte entries = ENTRIES, slot;
  bool old, ok, got, current; byte rc, oldseq;
  do
  :: len(pq) > 0 -> run_pending_call()    /* the eval breaker */
  :: atomic { entries > 0 && alive && (nq > 0 || scheduled) -> entries--;
#ifdef LIVENESS
       owed = (owed && nq == 0)
#endif
     };                                   /* an API entry point (drain_at_entry) */
     if
     :: nq > 0 -> WITNESS_HIT(4, true); drain_all()   /* gh-95820: drain directly */
     :: else -> skip
     fi;
     if
     :: atomic { scheduled -> rearm_step() }; rearm_rest()  /* stale: re-arm */
     :: scheduled -> skip                 /* not stale */
     :: else -> skip
     fi
  :: len(pq) == 0 -> skip                 /* Python code; nothing to run */
  :: break                                /* the interpreter exits */
  od;

  /* The exit hook (shutdown.hpp, shutdown_at_exit). */
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

/* REARM REFUSAL, a defect this model finds in the reference (liveness,
 * no lost call needed): a re-armer sets claim_seq_ to its new token before
 * Py_AddPendingCall; the older call runs in between, sees itself superseded
 * and drains without clearing scheduled_; then the host refuses the re-arm's
 * call and claim_seq_ goes back to the old call, which has already run.
 * scheduled_ stays set with no call outstanding: every later producer takes
 * the fast path, and items wait for an entry point or a sampled stale
 * re-arm (check rearm_refusal in tests/model/run.py). */

/* Liveness, checked with weak fairness (pan -a -f): while the interpreter
 * runs, an item in head_ is eventually taken, unless a refusal left it to the
 * next entry point (owed) or a lost call to the next chance to re-arm
 * (down).  Stated on nq because items are interchangeable for this property
 * and each one is pushed once. */
#ifdef LIVENESS
ltl drained { [] ((nq > 0 && interp == RUNNING) -> <> (nq == 0 || interp != RUNNING || owed || down)) }
#endif
