// SPDX-License-Identifier: Apache-2.0
/* pending_call_counter.c: count every Py_AddPendingCall an extension module
 * makes, and every run of the call it added, and write them to a file at exit.
 *
 * Used by tools/gpu_compare.py to prove which releases went through a
 * deferred-cleanup queue: a payload released on the main thread while one of
 * the counted calls was running was released by that call's drain.
 *
 * Why not LD_PRELOAD: a Debian or Ubuntu python3 links libpython statically,
 * so the executable itself defines Py_AddPendingCall, and the dynamic linker
 * looks in the executable before any preloaded library.  An extension module's
 * reference to the symbol therefore resolves to the executable's definition
 * whatever is preloaded.  Instead, dcpc_hook() rewrites the extension modules'
 * GOT slots for Py_AddPendingCall (R_X86_64_JUMP_SLOT or R_X86_64_GLOB_DAT
 * relocations of that name) to point at dcpc_add below, which records the call
 * and passes it on to the real function with a trampoline in place of (fn,
 * arg), so that each run of the call is recorded too.  Only objects whose path
 * contains one of the given substrings are patched.
 *
 * Thread: dcpc_add and the trampoline run on any thread (a CUDA destructor
 * thread, the main thread); records are claimed with one relaxed fetch_add
 * and never block or allocate.  The file is written by an atexit handler and
 * again by the library destructor (the later write wins), so calls made
 * during interpreter finalization are in it.
 *
 * Output (DCPC_OUT, JSON): {"hooked": N, "main_thread": T, "overflow": K,
 *   "events": [[t_ns, thread, kind, rc, finalizing], ...],
 *   "marks": [[t_ns, "text"], ...]}
 * kind: 0 = Py_AddPendingCall (rc its return value; finalizing what
 * _Py_IsFinalizing/Py_IsFinalizing returned just before), 1 = the call began
 * to run, 2 = it returned (rc its return value).  t_ns: CLOCK_MONOTONIC, the
 * clock of Python's time.perf_counter_ns on Linux.  thread: pthread_self(),
 * what threading.get_ident() returns.
 *
 * Sources: Py_AddPendingCall (Python/ceval_gil.c, v3.12.0); the System V
 * x86-64 psABI (R_X86_64_JUMP_SLOT, R_X86_64_GLOB_DAT); dl_iterate_phdr(3).
 * Build: cc -O2 -shared -fPIC -o libdcpc.so pending_call_counter.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef int (*pending_fn)(void*);
typedef int (*add_fn)(pending_fn, void*);

enum { kMaxCalls = 1 << 16, kMaxEvents = 3 * kMaxCalls, kMaxMarks = 64 };

struct call {
  pending_fn fn;
  void* arg;
};
struct event {
  int64_t t_ns;
  unsigned long thread;
  int kind;
  int rc;
  int finalizing;
};
struct mark {
  int64_t t_ns;
  char text[48];
};

static add_fn real_add;
static int (*real_finalizing)(void);
static struct call calls[kMaxCalls];
static atomic_int n_calls;
static struct event events[kMaxEvents];
static atomic_int n_events;
static atomic_int overflow;
static struct mark marks[kMaxMarks];
static atomic_int n_marks;
static int hooked;
static unsigned long main_thread;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void record(int kind, int rc, int finalizing) {
  int i = atomic_fetch_add_explicit(&n_events, 1, memory_order_relaxed);
  if (i >= kMaxEvents) {
    atomic_fetch_add_explicit(&overflow, 1, memory_order_relaxed);
    return;
  }
  events[i] = (struct event){now_ns(), (unsigned long)pthread_self(), kind, rc, finalizing};
}

static int trampoline(void* p) {
  struct call* c = p;
  record(1, 0, -1);
  int rc = c->fn(c->arg);
  record(2, rc, -1);
  return rc;
}

/* The replacement of Py_AddPendingCall in the patched GOT slots. */
int dcpc_add(pending_fn fn, void* arg) {
  int fin = real_finalizing ? real_finalizing() : -1;
  int i = atomic_fetch_add_explicit(&n_calls, 1, memory_order_relaxed);
  int rc;
  if (i < kMaxCalls) {
    calls[i] = (struct call){fn, arg};
    rc = real_add(trampoline, &calls[i]);
  } else {
    atomic_fetch_add_explicit(&overflow, 1, memory_order_relaxed);
    rc = real_add(fn, arg);
  }
  record(0, rc, fin);
  return rc;
}

/* A marker line in the output (e.g. "last-line"), with the time. */
void dcpc_mark(const char* text) {
  int i = atomic_fetch_add_explicit(&n_marks, 1, memory_order_relaxed);
  if (i >= kMaxMarks) return;
  marks[i].t_ns = now_ns();
  snprintf(marks[i].text, sizeof marks[i].text, "%s", text);
}

static void write_out(void) {
  const char* path = getenv("DCPC_OUT");
  if (path == NULL || !hooked) return;
  FILE* f = fopen(path, "w");
  if (f == NULL) return;
  int n = atomic_load(&n_events);
  if (n > kMaxEvents) n = kMaxEvents;
  fprintf(f, "{\"hooked\": %d, \"main_thread\": %lu, \"overflow\": %d, \"events\": [", hooked,
          main_thread, atomic_load(&overflow));
  for (int i = 0; i < n; ++i)
    fprintf(f, "%s[%lld, %lu, %d, %d, %d]", i ? ", " : "", (long long)events[i].t_ns,
            events[i].thread, events[i].kind, events[i].rc, events[i].finalizing);
  fprintf(f, "], \"marks\": [");
  int m = atomic_load(&n_marks);
  if (m > kMaxMarks) m = kMaxMarks;
  for (int i = 0; i < m; ++i)
    fprintf(f, "%s[%lld, \"%s\"]", i ? ", " : "", (long long)marks[i].t_ns, marks[i].text);
  fprintf(f, "]}\n");
  fclose(f);
}

__attribute__((destructor)) static void at_unload(void) { write_out(); }

struct patch_ctx {
  const char* const* names;
  int count;
};

static uintptr_t fix(uintptr_t p, uintptr_t base) { return p < base ? p + base : p; }

static void patch_slot(uintptr_t slot) {
  long page = sysconf(_SC_PAGESIZE);
  void* start = (void*)(slot & ~(uintptr_t)(page - 1));
  mprotect(start, (size_t)page, PROT_READ | PROT_WRITE); /* RELRO pages are read-only */
  *(add_fn*)slot = dcpc_add;
}

static void patch_relocs(const ElfW(Rela) * r, size_t bytes, const ElfW(Sym) * symtab,
                         const char* strtab, uintptr_t base, int* count) {
  for (size_t k = 0; k < bytes / sizeof *r; ++k) {
    unsigned type = ELF64_R_TYPE(r[k].r_info);
    if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
    const ElfW(Sym)* s = &symtab[ELF64_R_SYM(r[k].r_info)];
    if (strcmp(strtab + s->st_name, "Py_AddPendingCall") != 0) continue;
    patch_slot(base + r[k].r_offset);
    ++*count;
  }
}

static int visit(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct patch_ctx* ctx = data;
  const char* name = info->dlpi_name;
  if (name == NULL || name[0] == '\0') return 0; /* the executable itself */
  int wanted = 0;
  for (const char* const* n = ctx->names; *n != NULL; ++n)
    if (strstr(name, *n) != NULL) wanted = 1;
  if (!wanted) return 0;
  uintptr_t base = info->dlpi_addr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
    const ElfW(Dyn)* d = (const ElfW(Dyn)*)(base + info->dlpi_phdr[i].p_vaddr);
    const ElfW(Sym)* symtab = NULL;
    const char* strtab = NULL;
    const ElfW(Rela)* jmprel = NULL, *rela = NULL;
    size_t jmpsz = 0, relasz = 0;
    for (; d->d_tag != DT_NULL; ++d) {
      switch (d->d_tag) {
        case DT_SYMTAB:
          symtab = (const ElfW(Sym)*)fix(d->d_un.d_ptr, base);
          break;
        case DT_STRTAB:
          strtab = (const char*)fix(d->d_un.d_ptr, base);
          break;
        case DT_JMPREL:
          jmprel = (const ElfW(Rela)*)fix(d->d_un.d_ptr, base);
          break;
        case DT_PLTRELSZ:
          jmpsz = d->d_un.d_val;
          break;
        case DT_RELA:
          rela = (const ElfW(Rela)*)fix(d->d_un.d_ptr, base);
          break;
        case DT_RELASZ:
          relasz = d->d_un.d_val;
          break;
        default:
          break;
      }
    }
    if (symtab == NULL || strtab == NULL) continue;
    if (jmprel) patch_relocs(jmprel, jmpsz, symtab, strtab, base, &ctx->count);
    if (rela) patch_relocs(rela, relasz, symtab, strtab, base, &ctx->count);
  }
  return 0;
}

/* Patch the Py_AddPendingCall slots of every loaded object whose path
 * contains one of `names` (a NULL-terminated array).  Call from the main
 * thread after the modules are imported.  Returns the slots patched. */
int dcpc_hook(const char* const* names) {
  if (real_add == NULL) {
    real_add = (add_fn)dlsym(RTLD_DEFAULT, "Py_AddPendingCall");
    real_finalizing = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsFinalizing"); /* 3.13+ */
    if (real_finalizing == NULL)
      real_finalizing = (int (*)(void))dlsym(RTLD_DEFAULT, "_Py_IsFinalizing"); /* 3.10-3.12 */
    if (real_add == NULL) return -1;
    main_thread = (unsigned long)pthread_self();
    atexit(write_out);
  }
  struct patch_ctx ctx = {names, 0};
  dl_iterate_phdr(visit, &ctx);
  hooked += ctx.count;
  return ctx.count;
}
