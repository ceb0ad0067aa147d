// SPDX-License-Identifier: Apache-2.0
// exit.cpp: the CPython host at interpreter exit, for each of the three
// variants: the reference's exit sequence, the Py_AtExit backstop of every
// variant, and the backstop's report (DC_STATS_AT_EXIT).
//
//   variant        exit hook (Python atexit phase)     Py_AtExit backstop
//   reference      drain while destructors are due,    host dead, count
//                  close the gate, wait it out, final  leaked items
//                  drain; then main-thread drains only
//                  (a late destroy waits again) until
//                  CPython finalizes: host dead
//   seed           none                                stop accepting (the
//                                                      PR #2371 text), count
//   cuda-core-1.2  none                                count only (the wheel
//                                                      registers nothing)
//   cuda-core-     its minimal exit fix: drain while   count only
//   1.2-fixed      destructors are due, close the
//                  gate, wait it out, final drain
//                  (steps 0-3; no late drains, no
//                  host-dead step: its drain's shipped
//                  finalizing test leaks instead)
//
// The backstop's counting never changes a variant's behaviour: it walks the
// list without taking it.  The sequence's steps are numbered as in
// shutdown.hpp; the exit wait is a setting (configure(exit_wait_s),
// Settings in deferred_cleanup/host.hpp).
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "deferred_cleanup/drain.hpp"
#include "deferred_cleanup/shutdown.hpp"
#include "host.hpp"

namespace deferred_cleanup::host {

// ---------------------------------------------------------------- simulated drivers

std::mutex g_drivers_mu;
std::vector<std::pair<std::shared_ptr<SimulatedDriver>, int>> g_release_at_exit;
std::vector<std::weak_ptr<SimulatedDriver>> g_sim_drivers;

int g_atexit_rc = 0;

namespace {

// ---------------------------------------------------------------- exit report

char g_stats_path[4096] = {0};

struct ExitReport {
  bool ran = false;
  bool gate_clear = true;
  std::uint64_t gate_waited_us = 0;
  std::uint64_t final_drained = 0;
  std::uint64_t drained_while_waiting = 0;
  std::uint64_t awaited_us = 0;
  std::uint64_t destructors_not_run = 0;  // due at the end of the last exit wait
  std::uint64_t late_graphs = 0;          // graphs destroyed after the sequence, before finalizing
  std::uint64_t late_drained = 0;         // cleanups their waits ran
  std::uint64_t graphs_alive = 0;
  std::uint64_t payloads_in_live_graphs = 0;
  std::int64_t at_ns = 0;  // when the exit hook finished (steady clock)
};
ExitReport g_exit;

// ---------------------------------------------------------------- backstop

const char* kStatsKeys[] = {"created",
                            "cleaned",
                            "direct_cleanups",
                            "schedule_attempts",
                            "schedule_failures",
                            "pending_calls",
                            "drain_cycles",
                            "pending_calls_ignored",
                            "direct_drains",
                            "retries",
                            "rearms",
                            "main_rearms",
                            "leaked_at_shutdown",
                            "leaked_finalizing",
                            "gate_timeouts",
                            "forks"};

void write_stats_json(const char* path, std::int64_t backstop_ns) {
  // Plain C stdio: the interpreter is gone.  Relaxed snapshots (statistics).
  FILE* f = std::fopen(path, "w");
  if (f == nullptr) return;
  const Stats& s = stats();
  const std::atomic<std::uint64_t>* vals[] = {&s.created,
                                              &s.cleaned,
                                              &s.direct_cleanups,
                                              &s.schedule_attempts,
                                              &s.schedule_failures,
                                              &s.pending_calls,
                                              &s.drain_cycles,
                                              &s.pending_calls_ignored,
                                              &s.direct_drains,
                                              &s.retries,
                                              &s.rearms,
                                              &s.main_rearms,
                                              &s.leaked_at_shutdown,
                                              &s.leaked_finalizing,
                                              &s.gate_timeouts,
                                              &s.forks};
  auto u = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
  std::fprintf(f, "{\"variant\": \"%s\"", variant_name(g_variant));
  for (std::size_t i = 0; i < sizeof vals / sizeof vals[0]; ++i)
    std::fprintf(f, ", \"%s\": %llu", kStatsKeys[i], u(vals[i]->load(std::memory_order_relaxed)));
  const HostCounters& c = g_counters;
  const std::pair<const char*, const std::atomic<std::uint64_t>*> host_vals[] = {
      {"enqueued", &c.enqueued},
      {"enqueued_late", &c.enqueued_late},
      {"user_objects", &c.user_objects},
      {"cleanups_on_main", &c.cleanups_on_main},
      {"cleanups_off_main", &c.cleanups_off_main},
      {"cleanups_after_shutdown", &c.cleanups_after_shutdown},
      {"host_calls_after_teardown", &c.host_calls_after_teardown},
      {"deferred_interrupts", &c.deferred_interrupts},
      {"interrupts_unraisable", &c.interrupts_unraisable},
      {"interrupts_held_at_flush", &c.interrupts_held_at_flush},
      {"daemon_parks", &c.daemon_parks}};
  for (const auto& [k, v] : host_vals)
    std::fprintf(f, ", \"%s\": %llu", k, u(v->load(std::memory_order_relaxed)));  // statistics only
  std::fprintf(f, ", \"in_flight_at_backstop\": %llu",
               u(g_in_host.load(std::memory_order_relaxed)));  // statistics only
#if DC_TEST_HOOKS
  std::fprintf(f, ", \"gate_hook_passes\": %d", test_gate_hook_passes());  // test build only
#endif
  std::fprintf(f, ", \"atexit_table_full\": %s", g_atexit_rc != 0 ? "true" : "false");
  std::fprintf(f, ", \"exit_hook_ran\": %s", g_exit.ran ? "true" : "false");
  std::fprintf(f, ", \"exit_destructors_not_run\": %llu", u(g_exit.destructors_not_run));
  std::fprintf(f, ", \"exit_graphs_alive\": %llu", u(g_exit.graphs_alive));
  std::fprintf(f, ", \"exit_payloads_in_live_graphs\": %llu", u(g_exit.payloads_in_live_graphs));
  std::fprintf(f, ", \"exit_drained_while_waiting\": %llu", u(g_exit.drained_while_waiting));
  std::fprintf(f, ", \"exit_final_drained\": %llu", u(g_exit.final_drained));
  std::fprintf(f, ", \"exit_late_graphs\": %llu", u(g_exit.late_graphs));
  std::fprintf(f, ", \"exit_late_drained\": %llu", u(g_exit.late_drained));
  std::fprintf(f, ", \"exit_gate_clear\": %s", g_exit.gate_clear ? "true" : "false");
  // The seed's window: from the end of the Python atexit phase (our exit
  // hook, reference only) or, without one, unknown (-1), to the backstop.
  const long long window =
      g_exit.at_ns != 0 ? static_cast<long long>(backstop_ns - g_exit.at_ns) : -1;
  std::fprintf(f, ", \"exit_to_backstop_ns\": %lld", window);
  std::fprintf(
      f, ", \"check_to_call_ns_max\": %lld",
      static_cast<long long>(g_check_to_call_max.load(std::memory_order_relaxed)));  // statistics
  std::fprintf(f, "}\n");
  std::fclose(f);
}

#if DC_TEST_HOOKS
void test_noop_exit_callback() {}
#endif

/// Py_AtExit backstop (every variant): no Python API from here on.
void backstop() {
  const std::int64_t start = now_ns();
  // Seen by producers in host_add_pending_call (seq_cst; see g_in_host).
  g_torn_down.store(true, std::memory_order_seq_cst);
  g_counters.shutdown_done.store(true, std::memory_order_relaxed);  // main thread: program order
  with_queue([](auto& q) {
    using P = typename std::remove_reference_t<decltype(q)>::Policy;
    if constexpr (P::variant == Variant::reference) {
      q.close();  // already closed by the exit hook unless it never ran
      q.mark_host_dead();
    }
    if constexpr (P::close_at_py_atexit) {
      q.close();  // the seed's one shutdown step, first thing in its Py_AtExit callback
    }
  });
#if DC_TEST_HOOKS
  // Test hook: a producer held inside the window is released now, after
  // finalization; wait for it to leave the host call (bounded).
  test_hooks_at_backstop();
#endif
  // Test hook: simulated callbacks held for "after finalization".
  std::vector<std::pair<std::shared_ptr<SimulatedDriver>, int>> late;
  std::vector<std::shared_ptr<SimulatedDriver>> all;
  {
    std::lock_guard<std::mutex> lk(g_drivers_mu);
    late.swap(g_release_at_exit);
    for (auto& w : g_sim_drivers)
      if (auto d = w.lock()) all.push_back(std::move(d));
  }
  for (auto& [d, threads] : late) {
    try {
      d->release(threads);
    } catch (...) {
      // No thread could be started: the calls stay held, counted as leaked.
    }
  }
  // One deadline for every driver and the producers inside the host
  // (configure(backstop_wait_s)), whatever the number of drivers.
  const std::int64_t deadline =
      start + with_queue([](auto& q) -> Settings& {
                return q.settings;
              }).backstop_wait_ns.load(std::memory_order_relaxed);  // a setting
  auto left = [deadline] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::nanoseconds(std::max<std::int64_t>(0, deadline - now_ns())));
  };
  for (auto& d : all) d->wait_idle(left());
  deferred_cleanup::cpython::detail::wait_for_host_calls(g_in_host, deadline);  // host library's
  with_queue([](auto& q) { backstop_at_exit(q); });
  if (g_stats_path[0] != '\0') write_stats_json(g_stats_path, start);
  // Drivers in `late`/`all` are leaked on purpose: destroying one here could
  // run more destructors; the process is about to end.
  for (auto& [d, threads] : late) new std::shared_ptr<SimulatedDriver>(std::move(d));
  for (auto& d : all) new std::shared_ptr<SimulatedDriver>(std::move(d));
}

/// Step 0 of the exit sequence, below.
template <class Q>
std::uint64_t await_due_destructors(Q& q);

}  // namespace

void note_finalizing() {
  if (g_variant != Variant::reference || g_reference == nullptr) return;
  // Step 4 of the reference's shutdown (shutdown.hpp): once CPython has set
  // its finalizing flag, pending calls and entry points must not run
  // cleanups (Python objects of a dying interpreter).  The exit sequence
  // closed the gate earlier, so no Py_AddPendingCall is made after this.
  if (finalizing_now() && g_reference->host_alive()) g_reference->mark_host_dead();
}

void release_after_exit() {
  if (g_variant != Variant::reference || !g_exit.ran) return;
  if (!host_is_main_thread() || finalizing_now()) return;
  ReferenceQueue& q = *g_reference;
  if (!q.host_alive() || q.draining()) return;
  g_exit_sequence_running = true;  // releases everything: no early stop
  ++g_exit.late_graphs;            // main thread only (GIL)
  g_exit.late_drained += await_due_destructors(q);
  g_exit_sequence_running = false;
}

void track_simulated_driver(const std::shared_ptr<SimulatedDriver>& d) {
  std::lock_guard<std::mutex> lk(g_drivers_mu);
  std::erase_if(g_sim_drivers, [](const std::weak_ptr<SimulatedDriver>& w) { return w.expired(); });
  g_sim_drivers.emplace_back(d);
}

void release_at_backstop(const std::shared_ptr<SimulatedDriver>& d, int threads) {
  std::lock_guard<std::mutex> lk(g_drivers_mu);
  g_release_at_exit.emplace_back(d, threads);
}

// ---------------------------------------------------------------- exit hook (reference)

namespace {

/// Step 0 of the exit sequence: drain while destructors of destroyed graphs
/// are still due or items are queued, up to the exit wait; the GIL is
/// released between drains so the driver's threads (and Python threads a
/// destructor waits on) progress.  Main thread, GIL held.  Records what is
/// still outstanding in g_exit.  Returns the cleanups run.
template <class Q>
std::uint64_t await_due_destructors(Q& q) {
  struct Wait {
    Q& q;
    std::uint64_t drained = 0;
  } w{q};
  // The host library's exit wait (src/cpython/exit_phase.hpp): runs signal
  // handlers between drains; a Ctrl-C ends it, kept by the interrupt rule
  // and raised at the end of the exit sequence (raise_deferred_interrupt).
  const std::int64_t bound = q.settings.exit_wait_ns.load(std::memory_order_relaxed);  // a setting
  deferred_cleanup::cpython::detail::exit_wait(
      host_interrupts(), bound,
      [](void* wp) {
        Wait& w = *static_cast<Wait*>(wp);
        w.drained += drain_all(w.q);
        if (destructors_due() == 0 && w.q.empty_snapshot()) return false;
        return true;
      },
      &w);
  const std::uint64_t drained = w.drained;
  g_exit.destructors_not_run = destructors_due();
  g_exit.graphs_alive = graphs_alive();
  g_exit.payloads_in_live_graphs = payloads_in_live_graphs();
  return drained;
}

/// The Py_AtExit table was full at import (no backstop): the exit counters
/// (DC_STATS_AT_EXIT) are written here instead, at the end of the atexit
/// phase, so they stay reachable; what happens in finalization after this
/// is not in them.  Main thread, GIL held; once.
void write_stats_without_backstop() {
  static bool written = false;
  if (g_atexit_rc == 0 || written || g_stats_path[0] == '\0') return;
  written = true;
  write_stats_json(g_stats_path, now_ns());
}

/// The exit sequence, steps 0-3 (shutdown.hpp), of the reference and of
/// cuda-core-1.2-fixed's exit fix.  Main thread, GIL held; once.
template <class Q>
py::dict exit_sequence(Q& q) {
  if (!host_is_main_thread()) {
    throw NotMainThreadError(
        "_exit_hook() may only run on the main thread: cleanups run there only; nothing was "
        "drained");
  }
  py::dict d;
  if (g_exit.ran || !q.host_alive()) {
    d["already_done"] = true;
    return d;
  }
  // 0. Drain while destructors of graphs destroyed before exit are still due.
  const std::int64_t start = now_ns();
  g_exit_sequence_running = true;  // releases everything: no early stop (drain.hpp)
  const std::uint64_t drained = await_due_destructors(q);
  g_exit.drained_while_waiting = drained;
  g_exit.awaited_us = static_cast<std::uint64_t>((now_ns() - start) / 1000);
  // 1.-3. Close, wait out the gate, final drain (shutdown.hpp).  4., host
  // dead, comes when CPython starts finalizing (note_finalizing()).
  const ShutdownOutcome out = shutdown_at_exit(q, kDefaultGateBound);
  g_exit_sequence_running = false;
  g_counters.shutdown_done.store(true, std::memory_order_relaxed);  // main thread: program order
  g_exit.ran = true;
  g_exit.gate_clear = out.gate_clear;
  g_exit.gate_waited_us = out.waited_us;
  g_exit.final_drained = out.final_drained;
  g_exit.at_ns = now_ns();
  d["gate_clear"] = out.gate_clear;
  d["waited_us"] = out.waited_us;
  d["final_drained"] = out.final_drained;
  d["drained_while_waiting"] = drained;
  d["awaited_us"] = g_exit.awaited_us;
  d["destructors_not_run"] = g_exit.destructors_not_run;
  d["graphs_alive"] = g_exit.graphs_alive;
  d["payloads_in_live_graphs"] = g_exit.payloads_in_live_graphs;
  write_stats_without_backstop();
  raise_deferred_interrupt();
  return d;
}

py::dict exit_hook() {
  return with_queue([](auto& q) -> py::dict {
    using P = typename std::remove_reference_t<decltype(q)>::Policy;
    if constexpr (exit_release_of<P>()) {
      return exit_sequence(q);
    } else {
      throw std::logic_error(
          "_exit_hook: only the reference and cuda-core-1.2-fixed variants have an exit hook");
    }
  });
}

void mark_atexit_end() {
  // Comparison variants: the end of the Python atexit phase (the same
  // last-moment hook as the reference's exit sequence, doing nothing else),
  // so the backstop can report the width of the window between finalization
  // and the Py_AtExit callbacks.
  if (g_exit.at_ns == 0) g_exit.at_ns = now_ns();
  write_stats_without_backstop();
  raise_deferred_interrupt();  // one kept from CPython's exit-time flush (host_after_drain)
}
}  // namespace

void init_exit(py::module_& m) {
  const char* stats_path = std::getenv("DC_STATS_AT_EXIT");
  if (stats_path != nullptr) std::snprintf(g_stats_path, sizeof g_stats_path, "%s", stats_path);
#if DC_TEST_HOOKS
  if (std::getenv("DC_TEST_FILL_PY_ATEXIT") != nullptr) {
    // Test hook (test build only): fill CPython's Py_AtExit table
    // (NEXITFUNCS, 32 callbacks: Include/internal/pycore_atexit.h, v3.12.0)
    // as other extensions could.
    while (Py_AtExit(&test_noop_exit_callback) == 0) {
    }
  }
#endif
  g_atexit_rc = Py_AtExit(&backstop);  // -1 when the table is full (Python/pylifecycle.c, v3.12.0)
  if (g_atexit_rc != 0) {
    std::fprintf(stderr,
                 "deferred_cleanup: CPython's Py_AtExit table is full (32 callbacks): no backstop "
                 "at finalization; leaks after the exit sequence are not counted, and the exit "
                 "counters are written at the end of the atexit phase\n");
  }
  m.def("_exit_hook", &exit_hook,
        "_exit_hook() -> dict\n\nThe exit sequence of the reference and of cuda-core-1.2-fixed "
        "(registered by deferred_cleanup in "
        "the atexit "
        "phase, last on 3.10-3.13): drain while destructors are due (bounded by exit_wait_s), "
        "close the gate, "
        "wait it out, final drain; the host stays alive for main-thread drains until CPython "
        "finalizes. "
        "Raises NotMainThreadError off the main thread (nothing drained).");
  m.def(
      "_has_exit_hook",
      [] {
        return with_queue([](auto& q) {
          using P = typename std::remove_reference_t<decltype(q)>::Policy;
          return exit_release_of<P>();
        });
      },
      "_has_exit_hook() -> bool\n\nWhether the variant has the exit sequence (_exit_hook): the "
      "reference, and cuda-core-1.2-fixed's exit fix.");
  m.def("_mark_atexit_end", &mark_atexit_end,
        "_mark_atexit_end() -> None\n\nComparison variants: record the end of the atexit phase "
        "(for the window "
        "report of the Py_AtExit backstop).");
  m.def(
      "_register_exit_hook",
      [](py::object sequence) {
        // The host library's registration (src/cpython/exit_phase.hpp).
        if (deferred_cleanup::cpython::detail::register_exit_sequence(sequence.ptr()) != 0)
          throw py::error_already_set();
      },
      py::arg("sequence"),
      "_register_exit_hook(sequence: Callable[[], object]) -> None\n\nRegister the exit "
      "sequence late in the atexit phase: last on 3.10-3.13 (threading._register_atexit; "
      "every other handler runs first, once), at the position of the call on 3.14+.  The "
      "host library's registration, shared with every extension built on it.  Raises what "
      "importing atexit/threading or registering raises.");
  m.def(
      "_atexit_registered", [] { return g_atexit_rc == 0; },
      "_atexit_registered() -> bool\n\nWhether Py_AtExit accepted the backstop.");
}

}  // namespace deferred_cleanup::host
