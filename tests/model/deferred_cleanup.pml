/*
 * deferred_cleanup.pml: a Promela model of the reference's deferred-cleanup
 * protocol (ReferencePolicy in include/deferred_cleanup/policy.hpp),
 * with the re-arm rule of rearm.hpp and rearm_state.hpp (as of commit 5c53945,
 * moved there unchanged)
 * (the claim marked added but untimed after the add and its stale clock
 * started by the first look (the lazy clock), the claim moved by CAS, the superseded
 * call recorded by number, a refused re-arm whose old call ran gives the
 * claim back, a caller that may not re-arm leaves or gives back the claim's
 * clock, the main thread's re-arm past the bound, call_ran taking the claim
 * back before it reads the records).
 *
 * What is modelled (include/deferred_cleanup/*.hpp), one Promela
 * step per shared access of the code unless a comment says why two are one:
 *
 *   producer     a user object's destructor on a driver thread with no thread
 *                state (callback.hpp, on_user_object_destroyed): push its item
 *                onto head_, then one load of scheduled_ (check_scheduled, the
 *                fast path).  If it reads true the producer returns, after, on
 *                a sampled hit (one in 2^rearm_sample_log2 in the code, any hit here),
 *                calling rearm_if_stale.  Otherwise schedule() (scheduling.hpp):
 *                gate_enter, claim (an exchange), token_for_claim
 *                (rearm_state.hpp: set_claimed_at(0), new_call_token,
 *                set_claim_seq), Py_AddPendingCall with the
 *                token; accepted: call_added (the claim marked untimed,
 *                no clock); refused:
 *                unclaim;
 *                gate_leave.  A producer may run at any time, also during and
 *                after shutdown.
 *   pq           CPython's pending-call queue, a channel of capacity K shared
 *                with other users of Py_AddPendingCall (the foreign process);
 *                first in, first out; Py_AddPendingCall refuses (-1) when it
 *                is full and evicts nothing (Python/ceval_gil.c,
 *                _push_pending_call, v3.12.0; measured by the probe:
 *                cpython_facts.py).  An entry carries the call's sequence
 *                number (the CallToken's seq).  The code keeps tokens in 64
 *                reused slots (rearm_state.hpp, kCallTokens); a slot is reused only after
 *                64 further tokens, which these runs never take, so the model
 *                passes the number itself.
 *   lost calls   the host may accept one of our calls (return 0) and never
 *                run it, at most LOST times: on 3.10 and 3.11 a call added
 *                from a thread with no thread state while a subinterpreter
 *                holds the GIL goes to that interpreter (the probe's field
 *                subinterp.runner; bpo-10915).  Only producers (driver
 *                threads) lose calls: a Python thread at an entry point holds
 *                the GIL of its own (main) interpreter, so Py_AddPendingCall
 *                finds that interpreter (Python/ceval.c v3.11.0,
 *                Py_AddPendingCall, _PyThreadState_GET()).
 *   claim clock  claimed_at_ns_ is `clk`: 0, UNTIMED (kClaimUntimed: the
 *                claimant's call_added marks its claim added but untimed,
 *                reading no clock) or "running" (the first look, or a
 *                re-armer, started it): time is not modelled, so "now -
 *                claimed_at >= stale bound" is a nondeterministic choice of
 *                the caller of rearm_if_stale once the clock runs;
 *                take_stale_claim's CAS compares with "running", not with
 *                the stamp read (see rearm_if_stale below).
 *   re-arm       rearm_if_stale(q, main_entry) (rearm.hpp), step by
 *                step, as numbered in its comment: 0 time_claim (untimed:
 *                the first look starts the clock); 1 the clock (0: return;
 *                "not stale yet"); 2 superseded() and main_rearmed(): a
 *                superseded call recorded and not (main_entry and no call of
 *                the main thread recorded): return, the clock untouched;
 *                3 take_stale_claim; 4 claim_seq(), scheduled_snapshot()
 *                (0 or clear: return, the clock left at 0); 5
 *                take_supersede(old) = within; not within and not
 *                main_entry: give the stamp back (start_stale_clock(old,
 *                seen)), return; 6 gate_enter (closed: release_supersede if
 *                within, return); 7 new_call_token (new); not within:
 *                take_main_rearm(new) (fails: gate_leave, give the stamp
 *                back, return); 8 move_claim_seq(old, new) (fails: release
 *                the record, gate_leave, return); 9 add_call (a producer's
 *                may be lost, the main thread's never); accepted:
 *                start_stale_clock(new); refused: release the record,
 *                move_claim_seq(new, old), ran_at_least(old) and
 *                move_claim_seq(old, 0) (then unclaim, gate_leave and
 *                schedule() again), else start_stale_clock(old); 10
 *                gate_leave.  main_entry is true only at a main-thread entry
 *                point outside a drain (drain_at_entry); producers and the
 *                retrier pass false.
 *   main         the CPython main thread.  It runs queued pending calls (the
 *                eval breaker; drain.hpp, pending_call): call_ran (ran_max,
 *                then move the claim seq -> 0, then clear the superseded and
 *                the main thread's record if this call is as new: load, then
 *                CAS s -> 0), then, for the claim's call only,
 *                stop_stale_clock (set_claimed_at(0)) and the clear of
 *                scheduled_, then take
 *                until empty (clear_then_take).  It may hit API entry points
 *                (drain_at_entry: a direct drain when the queue is non-empty,
 *                gh-95820, then rearm_if_stale when scheduled_ is set), may
 *                run Python code for ever, or exits: the exit hook closes the
 *                gate, waits out the producers inside it, drains a last time
 *                and marks the host dead (shutdown.hpp); finalization may
 *                still run queued pending calls (no-ops by then); teardown.
 *   retrier      a non-main Python thread at an entry point: it can only
 *                retry scheduling or call rearm_if_stale (drain.hpp,
 *                drain_at_entry off the main thread, and retry_schedule).
 *
 * With the main thread's re-arm (the default; NO_MAIN_REARM takes it out) at
 * most three of our calls are queued: the claim's call, a superseded one and
 * the main thread's call past the bound.
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
 * The relaxed accesses of the re-arm rule (claim_seq_, superseded_seq_,
 * claimed_at_ns_, ran_max_seq_) are modelled sequentially consistent too.
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
 *   LOST_APART     a further lost call only after a call newer than the last
 *                  lost one ran: no two losses in a row (the liveness
 *                  assumption of the rule without the main thread's re-arm)
 *   NO_MAIN_REARM  main_entry is always false: the rule within the bound only
 *   NO_RETRIER     the second Python thread never reaches an entry point
 *                  (smaller runs; the producers and the main thread remain)
 * Negative variants; spin must find a counterexample for each:
 *   LOST_WAKEUP    the pending call takes first and clears scheduled_ after
 *                  the drain, with no re-check (liveness: an item stranded);
 *   FAST_REORDERED the fast-path load of scheduled_ before the push, as the
 *                  store buffering of acquire/release allows (liveness);
 *   NO_GATE        no in-flight gate: producers only check accepting_, and
 *                  shutdown does not wait (a pending call after teardown);
 *   RETRY_ENQUEUES a retry pushes the refused item again (cleaned twice);
 *   NO_REARM       a stale claim is never re-armed: with LOST >= 1 a lost
 *                  call leaves scheduled_ set for good (liveness);
 *   RECORDS_FIRST  call_ran reads the records before it moves the claim (the
 *                  rule before commit 5c53945): a re-arm can record the
 *                  running call as superseded and win the claim from it, and
 *                  the record stays (liveness, with the retrier);
 *   DROP_CLOCK     no step 2 and no give-back (the rule before commit
 *                  e9c0da5): a look that took the stale claim and may not
 *                  re-arm leaves its clock at 0, so that claim is never
 *                  stale again (liveness, with the retrier).
 * A candidate rule (docs/design/scheduling.rst, "the flag holds the claim's
 * number"), a switch rather than a second copy so that the two cannot drift:
 *   FLAG_SEQ       scheduled_ holds the claim's call's number (0: none) and
 *                  claim_seq_ is gone (claim_seq names scheduled): a claim
 *                  takes a token, then CAS 0 -> seq; the claim's call clears
 *                  with call_ran's CAS seq -> 0 (the clear of the wakeup
 *                  pair), a superseded call's CAS fails and it only drains;
 *                  a re-arm moves seq -> seq' on the same word and a refused
 *                  one's give-back CAS old -> 0 is the unclaim; step 4 of the
 *                  rule is one load.  The records, the clock and the rest
 *                  are unchanged, stop_stale_clock included, which now comes
 *                  after the clear (run.py: check flag_seq, and --variant).
 *   FLAG_SEQ_STOP_FIRST  with FLAG_SEQ: the running call stops the clock
 *                  before its CAS, if it reads its own number in scheduled_
 *                  (check flag_seq_stop_first).
 * A candidate layout (docs/design/scheduling.rst, "one state word"; issue
 * "Performance"), also a switch:
 *   ONE_WORD       accepting_, alive_ (the lifecycle state open / closed /
 *                  dead), in_flight_ and scheduled_ (the claim) are fields of
 *                  one atomic word.  schedule()'s gate_enter, accepting_
 *                  check and claim become one compare-and-swap that, only
 *                  when the word says open and unclaimed, sets the claim and
 *                  adds one in-flight producer (so only the claimant enters
 *                  the host; a producer that finds the word claimed or
 *                  closed changes nothing); the refused claimant's unclaim
 *                  and gate_leave are one fetch_sub; the close is one
 *                  fetch_or that also returns the in-flight count; the
 *                  drain's clear is a fetch_and.  The re-arm's gate_enter
 *                  (step 6) is the same compare-and-swap without the claim.
 *                  The re-arm records, the claim's number and the stale
 *                  clock stay where they are.  Promela is sequentially
 *                  consistent, so in the model every access of the word was
 *                  already one step except the three of schedule()'s entry,
 *                  which become one (check one_word, --variant one-word).
 *   ONE_WORD_LLIST with ONE_WORD: the push itself says whether the list was
 *                  empty (the Linux llist_add idiom, include/linux/llist.h):
 *                  only a producer that pushed onto an empty list runs the
 *                  compare-and-swap above; one that pushed onto a non-empty
 *                  list returns at once (reading the word only for the
 *                  sampled stale look).  The drain tail (the clear, then the
 *                  takes) then has no store-buffering pair: both sides
 *                  decide with a read-modify-write of the word.
 *                  (check one_word_llist, --variant one-word-llist).
 *   RETRY_AT_PUSH  with LIVENESS: a refusal excuses a stranded item only until
 *                  the next push (the ghost `owed` is cleared by a push that
 *                  comes after the refusal): the promise "the next push or
 *                  entry point retries" (docs/caveats.rst), which the default
 *                  claim leaves to the entry points (checks
 *                  liveness_refusal_retry_at_push_nr, and
 *                  one_word_llist_retry_at_push, where a producer that pushes
 *                  onto a non-empty list never retries).
 * Witnesses (-DWITNESS=k, 1..17): one behaviour each that the verified model
 * must be able to reach; spin must find the assertion that marks it, which
 * shows the model is not vacuous (see WITNESS_HIT below and test_model.py).
 *
 * Properties:
 *   safety     assertions: no pending call added and no cleanup after
 *              teardown; no cleanup after the host died; never more cleanups
 *              than items; at most three of our pending calls queued (two
 *              with NO_MAIN_REARM), and at most one unless a stale claim was
 *              re-armed; at the end every item cleaned once or leaked.  pan
 *              also reports invalid end states (a shutdown that waits for
 *              ever).
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
 * the next look at a stale claim (the ghost `down`: set when a call is lost
 * or a re-arm refused, cleared at a look, i.e. a caller of rearm_if_stale that
 * finds the claim stale or its clock not running, while none of our calls is
 * queued or running up to the end of its call_ran (`inrun`; a queued one runs
 * first and may clear scheduled_ or the records) and no caller is between its
 * add and its start_stale_clock or inside a re-arm (`busy`: the clock is 0
 * for a moment there by design).  A look counts whether or not the rule lets
 * that caller re-arm, except with two losses in a row (LOST >= 2 without
 * LOST_APART), where only the main thread's look counts: past the bound of
 * two only the main thread re-arms, by design.
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
#ifndef WITNESS
#define WITNESS 0
#endif
#ifndef NO_MAIN_REARM
#define MAX_OURS 3
#define MAIN_ON 1             /* drain_at_entry passes main_entry = !draining() */
#else
#define MAX_OURS 2
#define MAIN_ON 0             /* the main thread re-arms like everyone else */
#endif
#define ME(on_main) (on_main && MAIN_ON)   /* rearm_if_stale's main_entry */
#ifdef LOST_APART
/* A further call may be lost only after a call newer than the last lost one
 * ran (by FIFO, after the lost call's re-armed successor ran): an older call
 * that runs after a loss, e.g. the call the lost one superseded, does not
 * separate two losses. */
#define LOSS_ALLOWED (lost == 0 || ran_max > lost_seq)
#else
#define LOSS_ALLOWED true
#endif
#define WITNESS_HIT(k, cond) assert(!(WITNESS == k && (cond)))

/* Interpreter phases. */
#define RUNNING    0   /* before the exit hook */
#define EXITING    1   /* exit hook and finalization; interpreter alive */
#define TORN_DOWN  2   /* after Py_FinalizeEx: no CPython call may happen */

mtype = { OURS, OTHER };
chan pq = [K] of { mtype, byte };   /* the function, and our call's number */

/* The queue's shared state (queue.hpp; the re-arm state: rearm_state.hpp). */
byte nq = 0;          /* items in head_ */
#ifndef FLAG_SEQ
bool scheduled = 0;   /* scheduled_ */
#else
byte scheduled = 0;   /* scheduled_ holds the claim's call's number, 0: none */
#endif
bool accepting = 1;   /* accepting_ */
byte in_flight = 0;   /* in_flight_ */
bool alive = 1;       /* alive_ (mark_host_dead) */
byte next_seq = 0;    /* next_seq_: sequence numbers taken */
#ifndef FLAG_SEQ
byte claim_seq = 0;   /* claim_seq_: the claim's call, 0 for none */
#else
#define claim_seq scheduled   /* one word: every claim_seq access is one of scheduled */
#endif
byte superseded = 0;  /* superseded_seq_: the superseded call, 0 for none */
byte ran_max = 0;     /* ran_max_seq_: highest number that ran */
#define UNTIMED 2     /* kClaimUntimed: added, no look yet */
byte clk = 0;         /* claimed_at_ns_: 0, 1 (a stamp: the clock runs) or UNTIMED */
byte main_rec = 0;    /* main_seq_: the main thread's call past the bound */

/* The interpreter. */
byte interp = RUNNING;

/* Ghost state for the properties. */
byte pushed = 0;      /* items pushed by producers (each pushes one, once) */
byte cleaned = 0;     /* cleanups run */
byte leaked = 0;      /* items counted as leaked at the end */
byte ours_out = 0;    /* our pending calls queued in pq, not yet started */
byte lost = 0;        /* our pending calls the host lost */
bool rearmed = 0;     /* a re-arm added a call */
byte lost_seq = 0;    /* the number of the last lost call */
#if defined(LIVENESS) || defined(RETRY_ENQUEUES)
bool owed = 0;        /* a refused claimant gave scheduled_ back; since then no
                         pending call was added and no entry point drained */
bool down = 0;        /* a call was lost (or a re-arm refused); since then no
                         look at the claim came while none of our calls was
                         queued and nobody was busy */
byte busy = 0;        /* callers between a successful add and their
                         start_stale_clock, or inside a re-arm after
                         take_stale_claim */
#define OWED(v) owed = v
#ifdef RETRY_AT_PUSH
#define PUSHED_AFTER_REFUSAL owed = 0
#else
#define PUSHED_AFTER_REFUSAL skip
#endif
#define DOWN(v) down = v
#define BUSY_INC busy++
#define BUSY_DEC busy--
#define INRUN(v) inrun = v
bool inrun = 0;       /* the main thread runs one of our calls, up to the end
                         of call_ran: that call counts as still queued */
/* A look at the claim that the rule must use (see the header): any look
 * when at most one call was lost, or two not in a row; with two in a row
 * (past the bound of two for every other caller, by design) only the main
 * thread's look. */
#if defined(LOST_APART) || LOST < 2
#define CHANCE(on_main) if :: ours_out == 0 && !inrun && busy == 0 -> down = 0 :: else -> skip fi
#else
#define CHANCE(on_main) if :: on_main && ours_out == 0 && !inrun && busy == 0 -> down = 0 :: else -> skip fi
#endif
#else
/* Ghosts of the liveness claim (and of RETRY_ENQUEUES's bug) only: left out
 * of the safety state space. */
#define OWED(v) skip
#define PUSHED_AFTER_REFUSAL skip
#define DOWN(v) skip
#define BUSY_INC skip
#define BUSY_DEC skip
#define CHANCE(on_main) skip
#define INRUN(v) skip
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

/* drain.hpp, drain_all: take the whole list and run its cleanups, until a
 * take comes back empty.  Cleanups touch only main-thread and ghost state, so
 * each take and the cleanups of what it took form one indivisible step:
 * producers interleave before and after every take, which is what the
 * properties depend on.  The re-entrancy flag is not modelled: cleanups here
 * run no Python code.  host_alive() is main-thread state (only the main
 * thread writes alive_ and only it reads it here). */
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

/* drain.hpp, pending_call<P>, run by the main thread for the oldest entry of
 * pq.  CPython pops it under its lock and then calls it.  The pop and
 * call_ran's update of ran_max_seq_ are one step: only the main thread writes
 * ran_max_seq_, and its one reader (ran_at_least, a re-armer after a
 * refusal) reading it between the two sees what it would see just before the
 * pop, which the model reaches.  Every other access of call_ran is a step. */
inline run_pending_call() {
  atomic {
    pq?m,seq;
    if
    :: m == OURS ->
       ours_out--; INRUN(1);
       if :: seq > ran_max -> ran_max = seq :: else -> skip fi
    :: else -> seq = 0                    /* a foreign pending call */
    fi
  };
  if
  :: m == OURS ->
#ifdef FLAG_SEQ_STOP_FIRST
     if                                   /* stop_stale_clock first, if ours looks current */
     :: scheduled == seq -> clk = 0
     :: else -> skip
     fi;
#endif
#ifndef RECORDS_FIRST
     atomic {                             /* call_ran: move_claim_seq(seq, 0) */
       if                                 /* FLAG_SEQ: the clear, [litmus:wakeup.clear] */
       :: claim_seq == seq -> claim_seq = 0; current = 1
       :: else -> current = 0
       fi
     };
#endif
     s = superseded;                      /* call_ran: load superseded_seq_ */
     atomic {                             /* FIFO: if s != 0 and seq >= s it is gone: CAS s -> 0 */
       if
       :: s != 0 && seq >= s -> if :: superseded == s -> superseded = 0 :: else -> skip fi
       :: else -> skip
       fi;
#if defined(NO_MAIN_REARM) && !defined(RECORDS_FIRST)
       INRUN(0)                           /* call_ran returns */
#else
       skip
#endif
     };
#ifndef NO_MAIN_REARM
     s = main_rec;                        /* call_ran: load main_seq_ */
     atomic {                             /* FIFO: the main thread's call is gone */
       if
       :: s != 0 && seq >= s -> if :: main_rec == s -> main_rec = 0 :: else -> skip fi
       :: else -> skip
       fi;
#ifndef RECORDS_FIRST
       INRUN(0)                           /* call_ran returns */
#else
       skip
#endif
     };
#endif
#ifdef RECORDS_FIRST
     atomic {                             /* the old order: the claim after the records */
       if
       :: claim_seq == seq -> claim_seq = 0; current = 1
       :: else -> current = 0
       fi;
       INRUN(0)
     };
#endif
     if
     :: !alive -> WITNESS_HIT(7, true)    /* after the host died: a no-op */
     :: alive && !current -> drain_all()  /* superseded: drains, no clear */
     :: alive && current ->
        WITNESS_HIT(12, lost > 0 && rearmed && scheduled);  /* recovered */
        recovered = (recovered || (lost > 0 && rearmed));
#ifndef FLAG_SEQ_STOP_FIRST
        clk = 0;                          /* set_claimed_at(0) */
#endif
#if defined(FLAG_SEQ)
        drain_all()                       /* cleared by call_ran's CAS seq -> 0 above */
#elif !defined(LOST_WAKEUP)
        scheduled = 0;                    /* clear(): [litmus:wakeup.clear], before the take */
        drain_all()
#else
        drain_all();
        scheduled = 0                     /* the bug: take, then clear */
#endif
     fi
  :: else -> skip
  fi;
  atomic { m = 0; seq = 0; s = 0; current = 0 }
}

/* Leave the gate (gate_leave). */
#ifndef NO_GATE
#define GATE_LEAVE in_flight--;
#define GATE_ENTER in_flight++;
#else
#define GATE_LEAVE skip;
#define GATE_ENTER skip;
#endif

/* add_call: Py_AddPendingCall with the call's number, inside the gate.  The
 * host accepts the call, loses it (a producer's only), or refuses it.
 * rc = 0 accepted (or lost), 1 refused.  An accepted call makes the caller
 * busy until its start_stale_clock. */
inline host_call(num, by_producer) {
  assert(interp != TORN_DOWN);            /* no pending call added after teardown */
  if
  :: len(pq) < K ->
     pq!OURS,num; ours_out++; OWED(0); rc = 0; BUSY_INC;
     assert(ours_out <= MAX_OURS);        /* at most three (two: NO_MAIN_REARM) */
     assert(ours_out <= 1 || rearmed)     /* and one unless a stale claim was re-armed */
  :: by_producer && lost < LOST && LOSS_ALLOWED ->  /* accepted, never run */
     lost++; lost_seq = num; DOWN(1); rc = 0; BUSY_INC;
     WITNESS_HIT(11, true)
  :: len(pq) == K ->
     rc = 1;                              /* refused */
     WITNESS_HIT(1, true)
  fi
}

/* rearm_state.hpp, call_added(num), then gate_leave: load claim_seq_; if it
 * is still `num`, CAS claimed_at 0 -> kClaimUntimed (no clock read). */
inline call_added_leave(num) {
  if
  :: atomic { claim_seq != num -> BUSY_DEC; GATE_LEAVE skip }  /* it ran, or moved on */
  :: claim_seq == num ->
     atomic { if :: clk == 0 -> clk = UNTIMED :: else -> skip fi; BUSY_DEC; GATE_LEAVE skip }
  fi
}

/* rearm_state.hpp, start_stale_clock(num), then gate_leave: load claim_seq_; if it
 * is still `num`, CAS claimed_at 0 -> now.  gate_leave is a left mover
 * (below) and joins the last step. */
inline start_stale_clock_leave(num) {
  if
  :: atomic { claim_seq != num -> BUSY_DEC; GATE_LEAVE skip }  /* it ran, or moved on */
  :: claim_seq == num ->
     atomic { if :: !clk -> clk = 1 :: else -> skip fi; BUSY_DEC; GATE_LEAVE skip }
  fi
}

/* scheduling.hpp, schedule, then gate_leave; the caller counts itself done.
 *
 * Reduction (Lipton's movers, sequentially consistent model): in_flight++ is
 * a right mover and in_flight-- a left mover, since the only statement that
 * reads in_flight is shutdown's wait for zero, which an increment can only
 * disable and a decrement only enable.  So gate_enter's increment is merged
 * with the accepting_ check after it, and gate_leave with the step before
 * it.  Every other shared access is a step of its own.  The store-buffering
 * side of the gate, which an SC model cannot show, is tests/litmus/. */
inline schedule(by_producer) {
#ifndef ONE_WORD
  atomic {
    GATE_ENTER                            /* gate_enter: [litmus:gate.enter] */
    ok = accepting                        /* [litmus:gate.check] */
  };
#else
  atomic {                                /* one CAS of the state word: open and */
    ok = accepting;                       /* unclaimed -> claimed, in_flight + 1 */
    if
    :: ok && !scheduled -> scheduled = 1; old = 0; GATE_ENTER skip
    :: ok && scheduled -> old = 1         /* already scheduled: the word unchanged */
    :: else -> skip                       /* closed: the word unchanged */
    fi
  };
#endif
  if
  :: ok ->
#if defined(ONE_WORD)
     skip;                                /* the claim was the CAS above */
#elif !defined(FLAG_SEQ)
     atomic {
       old = scheduled; scheduled = 1;    /* claim(): [litmus:wakeup.claim] */
#else
     atomic { next_seq++; seq = next_seq };   /* new_call_token, before the claim */
     atomic {                             /* claim(): CAS 0 -> seq, [litmus:wakeup.claim] */
       old = (scheduled != 0);
       if :: !old -> scheduled = seq :: else -> skip fi;
#endif
#ifndef ONE_WORD
       if
       :: old -> GATE_LEAVE skip          /* already scheduled */
       :: else -> skip
       fi
     };
#endif
     if
     :: !old ->
        clk = 0;                          /* set_claimed_at(0) */
#ifndef FLAG_SEQ
        atomic { next_seq++; seq = next_seq };   /* new_call_token */
        claim_seq = seq;                  /* set_claim_seq */
#endif
        atomic { host_call(seq, by_producer) };  /* add_call */
        if
        :: rc == 0 -> call_added_leave(seq)
        :: else ->                        /* refused: unclaim() */
           atomic { scheduled = 0; OWED(1); GATE_LEAVE skip }
        fi
     :: else -> skip
     fi
  :: else ->
     atomic {
       WITNESS_HIT(2, interp == TORN_DOWN);  /* a late callback backs out */
#ifndef ONE_WORD
       GATE_LEAVE skip
#else
       skip                               /* it never entered: the CAS failed */
#endif
     }
  fi;
  atomic { old = 0; rc = 0; ok = 0; seq = 0 }
}

/* The refused re-arm (rearm.hpp, rearm_if_stale, rc != 0), after
 * release_supersede (or release_main_rearm): the old call is the claim's call
 * again, unless it ran meanwhile; then give the claim back and retry.  The
 * caller is busy on entry; every branch ends that. */
inline refused_rearm(by_producer) {
  atomic {                                /* move_claim_seq(new, old) */
    if :: claim_seq == nseq -> claim_seq = oseq; mv = 1 :: else -> mv = 0 fi
  };
  if
  :: mv ->
     if
     :: ran_max >= oseq ->                /* ran_at_least(old) */
        atomic {                          /* move_claim_seq(old, 0) */
          if :: claim_seq == oseq -> claim_seq = 0; gb = 1 :: else -> gb = 0 fi
        }
     :: else -> gb = 0
     fi;
     if
     :: gb ->
        WITNESS_HIT(13, true);            /* the old call ran: give the claim back */
#ifndef FLAG_SEQ
        atomic { scheduled = 0; BUSY_DEC; GATE_LEAVE skip };  /* unclaim, gate_leave */
#else
        atomic { BUSY_DEC; GATE_LEAVE skip };  /* the CAS old -> 0 was the unclaim */
#endif
        schedule(by_producer)             /* and retry */
     :: else -> start_stale_clock_leave(oseq)   /* retried one bound later */
     fi
  :: else -> atomic { BUSY_DEC; GATE_LEAVE skip }
  fi
}

/* rearm_state.hpp, start_stale_clock(old, seen) on the paths where a caller that
 * took the stale claim may not re-arm it (steps 5 and 7 of the rule): load
 * claim_seq_; if it is still `num`, CAS claimed_at_ns_ 0 -> seen, the stamp
 * taken, so the claim is stale again at once.  The caller stops being busy.
 * DROP_CLOCK (the rule before the fix; a negative variant) leaves the clock
 * at 0 instead: that claim is never stale again. */
#ifndef DROP_CLOCK
inline give_back_clock(num) {
  if
  :: atomic { claim_seq != num -> BUSY_DEC }   /* it ran, or moved on */
  :: claim_seq == num ->
     atomic { if :: !clk -> clk = 1; WITNESS_HIT(16, true) :: else -> skip fi; BUSY_DEC }
  fi
}
#else
#define give_back_clock(num) BUSY_DEC
#endif

/* release_supersede (within the bound) or release_main_rearm(new) (past it). */
#define RELEASE_RECORD if :: sup -> superseded = 0 :: else -> if :: main_rec == nseq -> main_rec = 0 :: else -> skip fi fi

/* rearm.hpp, rearm_if_stale(q, main_entry), entered by a caller that has
 * just read scheduled_ set (a producer's sampled fast-path hit, an entry
 * point's snapshot).  on_main: the caller is the main thread at an entry
 * point, outside a drain; main_entry is ME(on_main) (false with
 * NO_MAIN_REARM); on_main also says whose look counts for `down` (CHANCE).
 * Steps 1-3 of the rule: claimed_at() (0: return) and the stale test, the
 * loads of superseded() and main_rearmed() (one step, `pass`: main_seq_ is
 * written only by the main thread, so for the main thread the two loads
 * read what one would), then take_stale_claim.  claimed_at_ns_ is "running
 * or not" here, so the CAS is modelled as "still running -> 0", not as a
 * compare with the stamp read: where the code's CAS fails because another
 * stamp was written meanwhile, the model may take that stamp (more
 * behaviours, none fewer); its failure branch is also kept.  "Not stale
 * yet" is always possible (time is not modelled).  After a successful take
 * the caller is busy until it restarts or gives back a clock, or leaves. */
inline rearm_if_stale(by_producer, on_main) {
  /* time_claim: the first look at an added claim starts its clock (CAS
   * UNTIMED -> stamp); the code then tests the stamp against the bound, so
   * the choice below follows (with a positive bound it is "not stale yet";
   * the model also lets it be stale, more behaviours, none fewer).  This
   * look alone is no CHANCE: it cannot find the claim stale for a bound. */
  if
  :: atomic { clk == UNTIMED -> clk = 1 }
  :: else -> skip
  fi;
  if
  :: atomic { clk == 0 -> CHANCE(on_main); got = 0 }   /* seen == 0: no clock */
  :: got = 0                                       /* not stale yet */
  :: clk == 1 ->
     atomic {                                      /* step 2 */
#ifndef DROP_CLOCK
       pass = (superseded == 0 || (ME(on_main) && main_rec == 0));
#else
       pass = 1;                                   /* the old rule: no such step */
#endif
       if :: !pass -> CHANCE(on_main) :: else -> skip fi
     };
     if
     :: pass ->
        if
        :: atomic { clk == 1 -> clk = 0; CHANCE(on_main); BUSY_INC; got = 1 }  /* take_stale_claim */
        :: got = 0                                 /* the CAS fails: the clock changed */
        fi
     :: else -> got = 0                            /* at the bound: the claim left alone */
     fi
  fi;
  WITNESS_HIT(9, got && lost > 0);
#ifdef NO_REARM
  if :: got -> BUSY_DEC; got = 0 :: else -> skip fi;
#endif
  if
  :: got ->
     oseq = claim_seq;                    /* claim_seq() */
     if
     :: oseq == 0 -> got = 0
#ifndef FLAG_SEQ
     :: else -> if :: !scheduled -> got = 0 :: else -> skip fi   /* scheduled_snapshot() */
#else
     :: else -> skip                      /* the same load was scheduled_snapshot() */
#endif
     fi;
     if
     :: !got -> BUSY_DEC                  /* already_scheduled; the clock stays at 0 */
     :: else ->
        atomic {                          /* take_supersede(old): 0 -> old */
          if :: superseded == 0 -> superseded = oseq; sup = 1 :: else -> sup = 0 fi
        };
        if
        :: !sup && !ME(on_main) ->        /* step 5: give the stale claim back */
           WITNESS_HIT(17, true);
           give_back_clock(oseq); got = 0
        :: else -> skip
        fi
     fi
  :: else -> skip
  fi;
  if
  :: got ->                               /* step 6: gate_enter */
     atomic { GATE_ENTER ok = accepting; if :: !ok -> GATE_LEAVE skip :: else -> skip fi };
     if
     :: !ok ->                            /* not_accepting: release_supersede if within */
        atomic { if :: sup -> superseded = 0 :: else -> skip fi; BUSY_DEC }; got = 0
     :: else ->
        atomic { next_seq++; nseq = next_seq };       /* new_call_token */
        if
        :: !sup ->                        /* step 7: take_main_rearm(new): 0 -> new */
           atomic {
             if :: main_rec == 0 -> main_rec = nseq; mr = 1 :: else -> mr = 0 fi;
             if :: !mr -> GATE_LEAVE skip :: else -> skip fi   /* fails: gate_leave */
           };
           if :: !mr -> give_back_clock(oseq); got = 0 :: else -> skip fi
        :: else -> skip
        fi
     fi
  :: else -> skip
  fi;
  if
  :: got ->
     atomic {                             /* step 8: move_claim_seq(old, new) */
       if :: claim_seq == oseq -> claim_seq = nseq; mv = 1 :: else -> mv = 0 fi
     };
     if
     :: !mv ->                            /* the claim's call ran meanwhile */
        WITNESS_HIT(14, true);
        atomic { RELEASE_RECORD; BUSY_DEC; GATE_LEAVE skip }  /* release, gate_leave */
     :: else ->
        rearmed = 1;
        atomic {                          /* step 9: add_call (the main thread's is never lost) */
          host_call(nseq, by_producer);
          if
          :: rc == 0 -> BUSY_DEC;         /* busy once, until start_stale_clock */
             WITNESS_HIT(10, ours_out == 2);
             WITNESS_HIT(15, ours_out == 3)
          :: else -> DOWN(lost > 0)       /* refused: wait for the next look */
          fi
        };
        if
        :: rc == 0 -> start_stale_clock_leave(nseq)
        :: else ->
           atomic { RELEASE_RECORD };     /* release_supersede / release_main_rearm(new) */
           refused_rearm(by_producer)
        fi
     fi
  :: else -> skip
  fi;
  atomic { got = 0; sup = 0; ok = 0; rc = 0; oseq = 0; nseq = 0; mv = 0; gb = 0; pass = 0; mr = 0 }
}

#define REARM_LOCALS bool old, ok, got, sup, mv, gb, pass, mr; byte rc, seq, oseq, nseq

proctype producer() {
  REARM_LOCALS;
#if defined(ONE_WORD_LLIST)
  bool was_empty;
  atomic { was_empty = (nq == 0); nq++; pushed++; PUSHED_AFTER_REFUSAL };  /* llist_add */
  if
  :: was_empty -> schedule(true)          /* the CAS of the state word */
  :: !was_empty && scheduled ->           /* a sampled stale look: one load */
     rearm_if_stale(true, false)
  :: !was_empty -> skip                   /* fast path: no access of the word */
  fi;
#elif !defined(FAST_REORDERED)
  atomic { nq++; pushed++; PUSHED_AFTER_REFUSAL };  /* push: [litmus:wakeup.push] */
  if
  :: scheduled ->                         /* check_scheduled: [litmus:wakeup.check] */
     rearm_if_stale(true, false)          /* a sampled hit: sample_stale_check */
  :: scheduled -> skip                    /* fast path, not sampled */
  :: else -> schedule(true)               /* slow path */
  fi;
#else
  if                                      /* the load before the push */
  :: scheduled -> atomic { nq++; pushed++ }  /* and returns */
  :: else -> atomic { nq++; pushed++ }; schedule(true)
  fi;
#endif
  done++
}

/* Another Python thread at API entry points: drain_at_entry off the main
 * thread, i.e. retry_schedule. */
proctype retrier() {
  REARM_LOCALS;
  if
#ifndef NO_RETRIER
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
     :: nq > 0 && scheduled -> rearm_if_stale(false, false)  /* scheduled_snapshot */
     :: nq > 0 && !scheduled -> schedule(false)
     fi
#endif
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
  mtype m; byte entries = ENTRIES, s;
  bool current;
  REARM_LOCALS;
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
     :: scheduled -> rearm_if_stale(false, true)     /* scheduled_snapshot() */
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

/* Liveness, checked with weak fairness (pan -a -f): while the interpreter
 * runs, an item in head_ is eventually taken, unless a refusal left it to the
 * next entry point (owed) or a lost call to the next look at the claim
 * (down).  Stated on nq because items are interchangeable for this property
 * and each one is pushed once. */
#ifdef LIVENESS
ltl drained { [] ((nq > 0 && interp == RUNNING) -> <> (nq == 0 || interp != RUNNING || owed || down)) }
#endif
