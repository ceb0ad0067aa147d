// SPDX-License-Identifier: Apache-2.0
/* fork_cut_repro.c: does a fork() that cuts Py_AddPendingCall break the
 * child's pending calls?  A standalone reproducer: it needs a C compiler and
 * an installed CPython (3.10 or later, with its shared library), nothing else.
 *
 * Build (any CPython 3.10+ with python3.X-config; Linux):
 *     cc -O2 -pthread fork_cut_repro.c \
 *        $(python3.13-config --cflags --ldflags --embed) -o fork_cut_repro
 * Run:
 *     ./fork_cut_repro step 3             # x86-64: fork at every instruction of one add, 3 times
 *     ./fork_cut_repro signal 3000 120    # at most 3000 forks or 120 seconds
 *
 * The program embeds CPython.  A native thread with no thread state (the
 * "adder") calls Py_AddPendingCall; the main thread holds the GIL, runs
 * pending calls with Py_MakePendingCalls and forks.  The child (the main
 * thread only) calls PyOS_AfterFork_Child as os.fork does, runs the pending
 * calls it inherited, then adds ADDS calls of its own one at a time, each
 * followed by Py_MakePendingCalls, and reports how many were accepted
 * (returned 0) but did not run.
 *
 * step: the adder makes one add with the x86 trap flag set, so it is stopped
 *   after exactly N instructions (N = 1, 2, ... until the add returns); the
 *   main thread forks at each stop.  Every instruction boundary of the add is
 *   cut once per repeat, the two between the count of npending and the
 *   advance of next included.  Prints, per boundary: [N, symbol, offset from
 *   it, forks, calls the children inherited, children that lost a call,
 *   children that lost all ADDS, children killed by a signal].
 * signal: the adder adds in a tight loop; for each fork the main thread
 *   sends SIGUSR1 to it and its handler reports that it stopped and waits
 *   until the fork is done, so the fork copies the adder wherever the signal
 *   caught it.  This is how often a fork lands in the window when nothing
 *   aims it.  Prints counts and "stops_by_pc": [symbol, offset, stops,
 *   children that lost a call] for every place the signal stopped the adder.
 *
 * Built with -DEMULATE_HALF_ADD (CPython 3.13 or later; it reads the
 * internal headers: add -I<include dir>/internal), the program instead puts
 * the main-thread ring into the state such a cut leaves (slot written and
 * npending counted, next not advanced) and forks once per run; the argument
 * is the number of runs.  It shows what a cut does, not how often one
 * happens.
 *
 * Offsets are from the nearest exported symbol (dladdr); compare them with
 * objdump -d of the libpython the program loads.
 *
 * CPython sources read (python/cpython):  _push_pending_call and
 * _make_pending_calls, Python/ceval_gil.c at v3.13.0, v3.14.7, v3.15.0rc1;
 * _PyRuntimeState_ReInitThreads, Python/pystate.c at the same tags;
 * PENDINGCALLSARRAYSIZE and MAXPENDINGCALLS_MAIN,
 * Include/internal/pycore_ceval_state.h at v3.13.0.
 */
#define PY_SSIZE_T_CLEAN
#ifdef EMULATE_HALF_ADD
#define Py_BUILD_CORE 1
#endif
#include <Python.h>
#ifdef EMULATE_HALF_ADD
#include "internal/pycore_runtime.h"
#endif

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define ADDS 4 /* calls the child adds, one at a time */

/* Adder side. */
static volatile sig_atomic_t in_add;  /* 1 while the adder is inside Py_AddPendingCall */
static atomic_int stop_in_add;        /* in_add as the signal found it */
static atomic_uintptr_t stop_pc;      /* the adder's program counter at the signal */
static atomic_int in_handler, main_draining, released, missed;
static sem_t stopped;
static atomic_int quit;

static void on_signal(int sig, siginfo_t *si, void *ctx) {
    (void)sig; (void)si;
    /* Store then load, both seq_cst, against the main thread's store of
     * main_draining then load of in_handler: at least one side sees the
     * other, so the main thread never waits on the ring's lock that this
     * thread may hold while it is stopped here. */
    atomic_store(&in_handler, 1);
    if (atomic_load(&main_draining)) {
        atomic_store(&in_handler, 0);
        atomic_store(&missed, 1);
        return;
    }
    atomic_store(&stop_in_add, in_add);
#if defined(__x86_64__)
    atomic_store(&stop_pc, (uintptr_t)((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RIP]);
#else
    (void)ctx;
#endif
    sem_post(&stopped);
    while (!atomic_load(&released)) sched_yield();
    atomic_store(&released, 0);
    atomic_store(&in_handler, 0);
}

static atomic_long added; /* calls the adder got accepted */
static long ran;           /* adder calls run (main thread only) */
static int adder_call(void *arg) { (void)arg; ran++; return 0; }

static void *adder(void *arg) {
    (void)arg;
    while (!atomic_load_explicit(&quit, memory_order_relaxed)) {
        in_add = 1;
        int r = Py_AddPendingCall(adder_call, NULL);
        in_add = 0;
        if (r == 0) atomic_fetch_add_explicit(&added, 1, memory_order_relaxed);
    }
    return NULL;
}

#if defined(__x86_64__)
/* Step mode: the adder runs one Py_AddPendingCall with the x86 trap flag
 * set, so the CPU raises SIGTRAP after every instruction; the SIGTRAP
 * handler stops the adder after exactly `target` instructions (the call
 * instruction counts as the first), so that each instruction boundary of the
 * add is cut by a fork in turn. */
static atomic_int step_arm, step_target, step_count, step_stopped;
static sem_t step_done;
static void on_trap(int sig, siginfo_t *si, void *ctx) {
    ucontext_t *uc = (ucontext_t *)ctx;
    (void)sig; (void)si;
    if (!in_add) { /* the add returned before the target */
        uc->uc_mcontext.gregs[REG_EFL] &= ~0x100L;
        return;
    }
    int n = atomic_fetch_add(&step_count, 1) + 1;
    if (n < atomic_load(&step_target)) return;
    uc->uc_mcontext.gregs[REG_EFL] &= ~0x100L; /* run the rest of the add normally */
    atomic_store(&stop_pc, (uintptr_t)uc->uc_mcontext.gregs[REG_RIP]);
    atomic_store(&step_stopped, 1);
    sem_post(&stopped);
    while (!atomic_load(&released)) sched_yield();
    atomic_store(&released, 0);
}

static void *step_adder(void *arg) {
    (void)arg;
    for (;;) {
        while (!atomic_load(&step_arm)) {
            if (atomic_load(&quit)) return NULL;
            sched_yield();
        }
        atomic_store(&step_arm, 0);
        in_add = 1;
        __asm__ volatile("pushfq; orq $0x100, (%%rsp); popfq" ::: "memory", "cc");
        (void)Py_AddPendingCall(adder_call, NULL);
        in_add = 0;
        __asm__ volatile("pushfq; andq $~0x100, (%%rsp); popfq" ::: "memory", "cc");
        sem_post(&step_done);
    }
}
#endif

/* Child side: the result it sends to the parent. */
struct child_result {
    int inherited;   /* pending calls that ran at the child's first Py_MakePendingCalls */
    int accepted;    /* of the child's ADDS calls, how many returned 0 */
    int lost_mask;   /* bit k: call k was accepted and had not run after Py_MakePendingCalls */
};

static int child_ran;
static int child_call(void *arg) { (void)arg; child_ran++; return 0; }
static int inherited_ran;
static int count_call(void *arg) { (void)arg; inherited_ran++; return 0; }

static void child_check(int fd, int (*inherited_func)(void *)) {
    struct child_result r = {0, 0, 0};
    (void)inherited_func;
    inherited_ran = 0;
    long ran_before = ran;
    (void)Py_MakePendingCalls();
    r.inherited = inherited_ran + (int)(ran - ran_before);
    for (int k = 0; k < ADDS; k++) {
        child_ran = 0;
        if (Py_AddPendingCall(child_call, NULL) == 0) {
            r.accepted++;
            (void)Py_MakePendingCalls();
            if (child_ran == 0) r.lost_mask |= 1 << k;
        }
    }
    if (write(fd, &r, sizeof r) != (ssize_t)sizeof r) _exit(3);
    _exit(0);
}

static int fork_and_check(int *fdp) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    PyOS_BeforeFork();
    pid_t pid = fork();
    if (pid == 0) {
        PyOS_AfterFork_Child();
        close(fds[0]);
        child_check(fds[1], count_call);
    }
    PyOS_AfterFork_Parent();
    close(fds[1]);
    *fdp = fds[0];
    if (pid < 0) return -1;
    return (int)pid;
}

/* Wait for the child.  Returns 0 when it reported, the signal number when a
 * signal killed it (a debug build aborts at the ring's asserts: SIGABRT),
 * -1 otherwise. */
static int collect(int pid, int fd, struct child_result *out) {
    int status = 0;
    ssize_t n = read(fd, out, sizeof *out);
    close(fd);
    if (waitpid(pid, &status, 0) != pid) return -1;
    if (WIFSIGNALED(status)) return WTERMSIG(status);
    if (n != (ssize_t)sizeof *out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child %d: status 0x%x, read %zd\n", pid, status, n);
        return -1;
    }
    return 0;
}

/* Run the adder's calls once it has DRAIN_AT queued, so that it spends
 * its time adding to a ring that has room rather than waiting for the
 * ring's lock or finding the ring full (MAXPENDINGCALLS_MAIN is 32). */
#define DRAIN_AT 16
static void drain_some(void) {
    if (atomic_load_explicit(&added, memory_order_relaxed) - ran >= DRAIN_AT)
        (void)Py_MakePendingCalls();
}

/* Name a program counter: the nearest exported symbol and the offset from
 * it, or, where dladdr finds no symbol (a static function of a debug build,
 * this program's own code), the file's base name and the offset from its
 * load address. */
static void pc_name(uintptr_t pc, const char **sym, unsigned long *off) {
    Dl_info di;
    *sym = "?";
    *off = 0;
    if (!pc || !dladdr((void *)pc, &di)) return;
    if (di.dli_sname) {
        *sym = di.dli_sname;
        *off = (unsigned long)(pc - (uintptr_t)di.dli_saddr);
    } else if (di.dli_fname) {
        const char *slash = strrchr(di.dli_fname, '/');
        *sym = slash ? slash + 1 : di.dli_fname;
        *off = (unsigned long)(pc - (uintptr_t)di.dli_fbase);
    }
}

/* Where the signal stopped the adder: symbol + offset, with counts. */
struct pc_bin {
    const char *sym;
    unsigned long off;
    int stops, lost;
};
static struct pc_bin bins[512];
static int nbins;
static void bin_pc(uintptr_t pc, int lost) {
    const char *sym;
    unsigned long off;
    pc_name(pc, &sym, &off);
    for (int i = 0; i < nbins; i++)
        if (bins[i].off == off && strcmp(bins[i].sym, sym) == 0) {
            bins[i].stops++;
            bins[i].lost += lost;
            return;
        }
    if (nbins < (int)(sizeof bins / sizeof bins[0]))
        bins[nbins++] = (struct pc_bin){sym, off, 1, lost};
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#ifdef EMULATE_HALF_ADD
/* The state a cut between the count and the advance leaves: the slot at
 * next is written and npending counts it, next still points at it. */
static int emulate(int runs) {
    int lost_children = 0, all_lost = 0, first_ran_rest_lost = 0, aborted = 0, last_signal = 0;
    struct child_result ex = {0, 0, 0};
    for (int i = 0; i < runs; i++) {
        struct _pending_calls *p = &_PyRuntime.ceval.pending_mainthread;
        (void)Py_MakePendingCalls();
        PyMutex_Lock(&p->mutex);
        int at = p->next;
        p->calls[at].func = count_call;
        p->calls[at].arg = NULL;
        p->calls[at].flags = 0;
        _Py_atomic_add_int32(&p->npending, 1);
        PyMutex_Unlock(&p->mutex);
        int fd;
        struct child_result r;
        int pid = fork_and_check(&fd);
        int rc = pid < 0 ? -1 : collect(pid, fd, &r);
        if (rc < 0) return 2;
        /* Repair the parent's ring the same way: let the slot be consumed and
         * the count drop, then put next one step on as the push would have. */
        PyMutex_Lock(&p->mutex);
        p->next = (at + 1) % PENDINGCALLSARRAYSIZE;
        PyMutex_Unlock(&p->mutex);
        (void)Py_MakePendingCalls();
        if (rc > 0) {
            aborted++;
            last_signal = rc;
            continue;
        }
        if (r.lost_mask) lost_children++;
        if (r.lost_mask == (1 << ADDS) - 1) all_lost++;
        if (r.lost_mask == ((1 << ADDS) - 1) - 1) first_ran_rest_lost++;
        ex = r;
    }
    printf("{\"mode\": \"emulate_half_add\", \"python\": \"%s\", \"gil_disabled\": %d, "
           "\"runs\": %d, \"adds_per_child\": %d, \"children_lost_any\": %d, "
           "\"children_lost_all\": %d, \"children_first_ran_rest_lost\": %d, "
           "\"children_killed\": %d, \"kill_signal\": %d, "
           "\"example\": {\"inherited\": %d, \"accepted\": %d, \"lost_mask\": %d}}\n",
           PY_VERSION,
#ifdef Py_GIL_DISABLED
           1,
#else
           0,
#endif
           runs, ADDS, lost_children, all_lost, first_ran_rest_lost, aborted, last_signal,
           ex.inherited, ex.accepted,
           ex.lost_mask);
    return 0;
}
#endif

#if defined(__x86_64__)
/* Step mode: fork once at every instruction boundary of one add, REPEATS
 * times over; print, per boundary, where the adder stood and how many of
 * its children lost calls. */
#define MAX_STEPS 1024
static int step_main(int repeats) {
    static struct {
        uintptr_t pc;
        int forks, lost_any, lost_all, inherited, killed;
    } at[MAX_STEPS + 1];
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTRAP, &sa, NULL);
    sem_init(&stopped, 0, 0);
    sem_init(&step_done, 0, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, step_adder, NULL) != 0) return 2;
    int length = 0, forks = 0;
    double t0 = now();
    for (int rep = 0; rep < repeats; rep++) {
        for (int target = 1; target <= MAX_STEPS; target++) {
            (void)Py_MakePendingCalls(); /* the ring is empty before each add */
            atomic_store(&step_count, 0);
            atomic_store(&step_stopped, 0);
            atomic_store(&step_target, target);
            atomic_store(&step_arm, 1);
            for (;;) {
                if (sem_trywait(&stopped) == 0) break;
                if (sem_trywait(&step_done) == 0) goto past_end;
                sched_yield();
            }
            int fd;
            struct child_result r;
            int pid = fork_and_check(&fd);
            atomic_store(&released, 1);
            int rc = pid < 0 ? -1 : collect(pid, fd, &r);
            if (rc < 0) return 2;
            sem_wait(&step_done);
            forks++;
            at[target].pc = atomic_load(&stop_pc);
            at[target].forks++;
            if (rc > 0) {
                at[target].killed++;
                continue;
            }
            at[target].inherited += r.inherited;
            at[target].lost_any += r.lost_mask != 0;
            at[target].lost_all += r.lost_mask == (1 << ADDS) - 1;
            continue;
        past_end:
            if (length == 0 || target - 1 < length) length = target - 1;
            break;
        }
    }
    atomic_store(&quit, 1);
    pthread_join(t, NULL);
    int lost_steps = 0;
    int killed_steps = 0;
    for (int i = 1; i <= length; i++) lost_steps += at[i].lost_any > 0;
    for (int i = 1; i <= length; i++) killed_steps += at[i].killed > 0;
    printf("{\"mode\": \"step\", \"python\": \"%s\", \"repeats\": %d, \"forks\": %d, "
           "\"seconds\": %.1f, \"add_instructions\": %d, \"adds_per_child\": %d, "
           "\"instructions_where_children_lost_calls\": %d, "
           "\"instructions_where_children_were_killed\": %d, \"steps\": [",
           PY_VERSION, repeats, forks, now() - t0, length, ADDS, lost_steps, killed_steps);
    for (int i = 1; i <= length; i++) {
        const char *sym;
        unsigned long off;
        pc_name(at[i].pc, &sym, &off);
        printf("%s[%d, \"%.60s\", %lu, %d, %d, %d, %d, %d]", i > 1 ? ", " : "", i, sym, off,
               at[i].forks, at[i].inherited, at[i].lost_any, at[i].lost_all, at[i].killed);
    }
    printf("]}\n");
    return 0;
}
#endif

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "step";
    int max_forks = argc > 2 ? atoi(argv[2]) : 1000;
    double max_s = argc > 3 ? atof(argv[3]) : 60.0;
    Py_InitializeEx(0);
#ifdef EMULATE_HALF_ADD
    (void)max_s;
    (void)mode;
    return emulate(max_forks);
#else
    if (strcmp(mode, "step") == 0) {
#if defined(__x86_64__)
        return step_main(max_forks);
#else
        fprintf(stderr, "step mode needs x86-64\n");
        return 2;
#endif
    }
    if (strcmp(mode, "signal") != 0) {
        fprintf(stderr, "usage: %s step [REPEATS] | signal [FORKS [SECONDS]]\n", argv[0]);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sem_init(&stopped, 0, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, adder, NULL) != 0) return 2;

    int forks = 0, in_add_count = 0, lost_children = 0, lost_in_add = 0, nex = 0, killed = 0;
    int lost_by_mask[1 << ADDS] = {0};
    char examples[8][160];
    double t0 = now();
    while (forks < max_forks && now() - t0 < max_s) {
        atomic_store(&missed, 0);
        pthread_kill(t, SIGUSR1);
        for (;;) {
            atomic_store(&main_draining, 1);
            if (atomic_load(&in_handler)) {
                atomic_store(&main_draining, 0);
                break;
            }
            drain_some();
            atomic_store(&main_draining, 0);
            if (atomic_exchange(&missed, 0)) pthread_kill(t, SIGUSR1);
        }
        /* The handler has committed to stopping or has seen us draining. */
        for (;;) {
            if (sem_trywait(&stopped) == 0) break;
            if (atomic_exchange(&missed, 0)) {
                /* Resend and drain until the handler commits. */
                pthread_kill(t, SIGUSR1);
                for (;;) {
                    atomic_store(&main_draining, 1);
                    if (atomic_load(&in_handler)) {
                        atomic_store(&main_draining, 0);
                        break;
                    }
                    drain_some();
                    atomic_store(&main_draining, 0);
                    if (atomic_exchange(&missed, 0)) pthread_kill(t, SIGUSR1);
                }
            }
        }
        int was_in_add = atomic_load(&stop_in_add);
        uintptr_t pc = atomic_load(&stop_pc);
        int fd;
        struct child_result r;
        int pid = fork_and_check(&fd);
        atomic_store(&released, 1);
        int rc = pid < 0 ? -1 : collect(pid, fd, &r);
        if (rc < 0) return 2;
        if (rc > 0) { /* a signal killed the child: counted as a child that lost its calls */
            killed++;
            r.lost_mask = (1 << ADDS) - 1;
        }
        while (atomic_load(&in_handler)) sched_yield();
        forks++;
        in_add_count += was_in_add;
        bin_pc(pc, r.lost_mask != 0);
        if (r.lost_mask) {
            lost_children++;
            lost_in_add += was_in_add;
            lost_by_mask[r.lost_mask]++;
            if (nex < 8) {
                const char *sym;
                unsigned long off;
                pc_name(pc, &sym, &off);
                snprintf(examples[nex++], sizeof examples[0],
                         "{\"inherited\": %d, \"accepted\": %d, \"lost_mask\": %d, "
                         "\"in_add\": %d, \"pc\": \"%.40s+0x%lx\"}",
                         r.inherited, r.accepted, r.lost_mask, was_in_add, sym,
                         (unsigned long)off);
            }
        }
    }
    atomic_store(&quit, 1);
    pthread_join(t, NULL);
    (void)Py_MakePendingCalls();
    printf("{\"mode\": \"signal_cut\", \"python\": \"%s\", \"forks\": %d, \"seconds\": %.1f, "
           "\"stops_in_add\": %d, \"adds_per_child\": %d, \"children_lost_any\": %d, "
           "\"children_lost_any_stopped_in_add\": %d, \"children_lost_all\": %d, "
           "\"children_killed\": %d, \"examples\": [",
           PY_VERSION, forks, now() - t0, in_add_count, ADDS, lost_children, lost_in_add,
           lost_by_mask[(1 << ADDS) - 1], killed);
    for (int i = 0; i < nex; i++) printf("%s%s", i ? ", " : "", examples[i]);
    printf("], \"stops_by_pc\": [");
    for (int i = 0; i < nbins; i++)
        printf("%s[\"%.60s\", %lu, %d, %d]", i ? ", " : "", bins[i].sym, bins[i].off,
               bins[i].stops, bins[i].lost);
    printf("]}\n");
    return 0;
#endif
}
