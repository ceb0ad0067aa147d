#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Side by side with cuda-core on a real GPU (``make gpu-compare``).

Runs the same five workloads (scenarios A-E below) on the shipped cuda-core
wheels and on this project's ``cuda`` driver, each scenario of each
implementation in its own subprocess with a timeout, and writes one JSON file
and a Markdown table generated from it::

    python3 tools/gpu_compare.py --out DIR \\
        [--cuda-core LABEL=PATH ...]  # PATH '' or 'env': the interpreter's own cuda-core
        [--ours VARIANT ...]  # DEFERRED_CLEANUP_VARIANT values (reference, cuda-core-1.2,
        #                     cuda-core-1.2-fixed, seed)
        [--scenarios A,B,C,D,E] [--budget-s 480] [--e-seconds 24]
    python3 tools/gpu_compare.py --render DIR/gpu-compare.json  # the table, from the JSON alone

``DIR`` receives ``gpu-compare.json``, ``gpu-compare.md`` and ``logs/`` (one
raw log per subprocess: its stdout and stderr).  Exit status: 0 when every
subprocess ran (a crash or hang of an implementation in a scenario is a
*result*, recorded as such, not a failure of the script); 2, with one line
saying why, when there is no NVIDIA driver, no GPU, no cuda-core or no
``deferred_cleanup`` to compare; 1 for a bug of the script itself.

The payload attached to a graph is a Python object whose release is observed
by its own ``__del__``: the time and the thread of each release, also during
interpreter finalization (a :func:`weakref.finalize` observer is blind there:
weakref's own atexit hook, which runs before the interpreter's exit sequence,
turns every finalizer off, ``atexit=False`` or not).  With ``DCPC_LIB`` set to
the shared library built from tools/pending_call_counter.c, each child also
patches the ``Py_AddPendingCall`` slots of cuda-core's and our extension
modules and so counts every pending call added, the thread that added it and
every run of it; scenarios D and X then say how many releases happened inside
such a run (``released_in_counted_call``).  On cuda-core a payload is a memset
node's ``dst_owner`` (cuda-core keeps it in a CUDA user object); on ours it is
``Graph.attach(payload)``.
Both sides use the same spin kernel (``dc_spin``, PTX text below, spinning on
``%globaltimer``): cuda-core as a kernel node of a ``GraphDefinition``, ours
through ``CudaDriver(spin_us=...)``.

Sources: cuda-core 1.2.x ``cuda.core.graph.GraphDefinition`` (``memset`` with
``dst_owner``, ``launch``, ``instantiate``; ``Graph.launch``/``close``); the
CUDA Driver API (``cuUserObjectCreate``, ``cuGraphRetainUserObject``);
``Py_AddPendingCall`` (Python/ceval_gil.c, v3.12.0); gh-95820.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import itertools
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: Scenario ids in table order, with a one-line title each.
SCENARIOS = {
    "A": "burst: 64 graphs x 16 payloads, half launched, all destroyed",
    "B-pure": "gh-95820: 8 graphs x 4 payloads behind 0.2 s kernels; 3 s pure-Python loop",
    "B-prop": "gh-95820: the same, the loop reads one property of an object it holds per iteration",
    "B-api": "gh-95820: the same, the loop calls one cheap API per iteration",
    "B-entry": "gh-95820: the same, the loop creates and drops one empty graph per iteration",
    "B-sleep": "gh-95820: the same, the loop calls time.sleep(0)",
    "C": "saturation: CPython's pending-call ring filled from another thread while destructors run",
    "D": "shutdown: interpreter exits with graphs alive and kernels running",
    "E": "lost-wakeup hunt: many short launched graphs, continuous draining",
    "X": "exit: 8 graphs x 25 payloads, each behind a 50 ms kernel, launched, all destroyed on the "
    "script's last line; 10 runs",
}
#: Runs of scenario X per implementation (each its own process).
X_RUNS = 10
#: Subprocess timeout per scenario (seconds); the whole run also has a budget.
TIMEOUT_S = {
    "A": 40,
    "B-pure": 25,
    "B-prop": 25,
    "B-api": 25,
    "B-entry": 25,
    "B-sleep": 25,
    "C": 30,
    "D": 30,
    "E": 75,
    "X": 20,
}

#: ``dc_spin(unsigned long long ns)``: one thread reading %globaltimer until
#: ns nanoseconds have passed.  The same text as kSpinPtx in
#: reference/src/driver_cuda.cpp (nvcc -ptx -arch=compute_75, CUDA 13.0,
#: .version lowered to 7.0).
SPIN_PTX = r"""
.version 7.0
.target sm_75
.address_size 64

.visible .entry dc_spin(
	.param .u64 dc_spin_param_0
)
{
	.reg .pred 	%p<2>;
	.reg .b64 	%rd<6>;

	ld.param.u64 	%rd2, [dc_spin_param_0];
	mov.u64 %rd3, %globaltimer;
$L__BB0_1:
	mov.u64 %rd4, %globaltimer;
	sub.s64 	%rd5, %rd4, %rd3;
	setp.lt.u64 	%p1, %rd5, %rd2;
	@%p1 bra 	$L__BB0_1;
	ret;
}
"""


class Unavailable(Exception):
    """Nothing to compare on this machine (exit status 2, one line)."""


# =====================================================================
# The child: one scenario on one implementation
# =====================================================================
class Payload:
    """A payload: a plain object that reports its own release (``__del__``)
    to the observer it was made by."""

    __slots__ = ("i", "obs", "__weakref__")

    def __init__(self, i: int, obs: "Releases") -> None:
        self.i = i
        self.obs = obs

    def __del__(self) -> None:
        self.obs._released(self.i)


class Releases:
    """Observes payload releases (Payload.__del__): time (ns) and thread.

    ``fd``, if given, also gets one line ``<i> <t_ns> <thread>`` per release,
    written at once (scenarios D and X: releases during interpreter exit).
    Everything the observer calls is bound to it at construction, so it still
    works while finalization clears the modules.
    """

    def __init__(self, fd: int | None = None) -> None:
        self.t: dict[int, int] = {}
        self.thread: dict[int, int] = {}
        self.made = 0
        self.fd = fd
        self._now = time.perf_counter_ns
        self._ident = threading.get_ident
        self._write = os.write

    def make(self, n: int) -> list:
        out = []
        for _ in range(n):
            out.append(Payload(self.made, self))
            self.made += 1
        return out

    def _released(self, i: int) -> None:
        t, tid = self._now(), self._ident()
        self.t[i] = t
        self.thread[i] = tid
        if self.fd is not None:
            self._write(self.fd, b"%d %d %d\n" % (i, t, tid))

    def count(self) -> int:
        return len(self.t)

    def wait_all(self, timeout_s: float, step_s: float = 0.001) -> bool:
        """Sleep in small steps (no API call) until every payload is released."""
        end = time.monotonic() + timeout_s
        while len(self.t) < self.made:
            if time.monotonic() > end:
                return False
            time.sleep(step_s)
        return True

    def threads(self, main: int) -> dict:
        on_main = sum(1 for v in self.thread.values() if v == main)
        return {
            "released_on_main": on_main,
            "released_off_main": len(self.thread) - on_main,
            "release_threads": len(set(self.thread.values())),
        }


class CudaCoreImpl:
    """cuda-core: GraphDefinition, a spin-kernel node, memset nodes owning payloads."""

    kind = "cuda-core"

    def __init__(self) -> None:
        import cuda.core as cc
        from cuda.core.graph import GraphDefinition

        self.cc = cc
        self.GraphDefinition = GraphDefinition
        self.dev = cc.Device(0)
        self.dev.set_current()
        self.stream = self.dev.create_stream()
        self.kernel = cc.ObjectCode.from_ptx(SPIN_PTX.encode()).get_kernel(
            "dc_spin"
        )  # str would be a path
        self.config = cc.LaunchConfig(grid=1, block=1)
        self.buf = self.dev.allocate(
            1 << 16, stream=self.stream
        )  # memset targets; lives as long as the process
        self.stream.sync()
        self.ptr = int(self.buf.handle)
        try:
            import numpy as np

            self._arg = np.uint64
        except ImportError:
            self._arg = ctypes.c_uint64

    def info(self) -> dict:
        from cuda import bindings

        return {
            "cuda_core": self.cc.__version__,
            "cuda_bindings": bindings.__version__,
            "module_layout": "cu" + bindings.__version__.split(".")[0],
            "cuda_core_path": str(Path(self.cc.__file__).parent),
        }

    def graph(self, payloads: list, spin_us: int):
        g = self.GraphDefinition()
        if spin_us:
            first = g.launch(self.config, self.kernel, self._arg(spin_us * 1000))
            for i, p in enumerate(payloads):
                first.memset(self.ptr + (i % 4096), 0, 1, dst_owner=p)
        else:
            for i, p in enumerate(payloads):
                g.memset(self.ptr + (i % 4096), 0, 1, dst_owner=p)
        return [g, None]

    def prepare(self, h) -> None:
        """Instantiate without launching (scenario X times the launches alone)."""
        if h[1] is None:
            h[1] = h[0].instantiate()

    def launch(self, h) -> None:
        self.prepare(h)
        h[1].launch(self.stream)

    def drop(self, h) -> None:
        if h[1] is not None:
            h[1].close()
        h[0] = h[1] = None

    def prop(self) -> None:
        _ = self.dev.arch  # a property of the Device object held since setup

    def api(self) -> None:
        _ = (
            self.cc.Device().arch
        )  # a cheap call: Device() for the current device, then the property

    def entry(self) -> None:
        # create_graph_handle is one of the two callers of
        # retry_deferred_cleanup in the 1.2.0 and 1.2.2 wheels (objdump of
        # _resource_handles.so; the other is create_graph_exec_handle).
        self.GraphDefinition()

    def extra(self) -> dict:
        return {}


class OursImpl:
    """Our `cuda` driver (deferred_cleanup.CudaDriver) in one variant."""

    kind = "ours"

    def __init__(self) -> None:
        import deferred_cleanup as dc

        self.dc = dc
        self.drivers: dict[int, object] = {}
        self.before = dc.counters()

    def driver(self, spin_us: int):
        if spin_us not in self.drivers:
            self.drivers[spin_us] = self.dc.CudaDriver(spin_us=spin_us)
        return self.drivers[spin_us]

    def info(self) -> dict:
        d = self.driver(0)
        return {
            "variant": self.dc.variant(),
            "driver_version": d.driver_version,
            "gpu": d.device_name,
            "package_path": str(Path(self.dc.__file__).parent),
        }

    def graph(self, payloads: list, spin_us: int):
        g = self.driver(spin_us).create_graph()
        for p in payloads:
            g.attach(p)
        return g

    def prepare(self, g) -> None:
        """Nothing: our driver's instantiate() instantiates and launches in one call."""

    def launch(self, g) -> None:
        g.instantiate()

    def drop(self, g) -> None:
        g.destroy()

    def prop(self) -> None:
        _ = self.driver(0).name  # a property read, not an entry point

    def api(self) -> None:
        self.dc.poll()  # the cheapest entry point

    def entry(self) -> None:
        self.driver(0).create_graph().destroy()

    def extra(self) -> dict:
        after = self.dc.counters()
        keys = [
            "enqueued",
            "cleaned",
            "pending_calls",
            "drain_cycles",
            "direct_drains",
            "schedule_failures",
            "retries",
            "destructors_on_main",
        ]
        out = {k: after[k] - self.before[k] for k in keys if k in after}
        out["destructor_threads"] = len(self.dc._native.destructor_threads())
        return out


class Counter:
    """tools/pending_call_counter.c in this process (``DCPC_LIB``): patch the
    Py_AddPendingCall slots of the extension modules that make pending calls
    (cuda-core's and ours); the library writes ``DCPC_OUT`` at exit."""

    MODULES = (b"cuda/core/", b"deferred_cleanup/")

    def __init__(self) -> None:
        path = os.environ.get("DCPC_LIB")
        self.lib = ctypes.CDLL(path) if path else None
        self.slots = 0

    def hook(self) -> int:
        """Patch what is loaded now; returns the slots patched so far."""
        if self.lib is not None and self.slots <= 0:
            names = (ctypes.c_char_p * (len(self.MODULES) + 1))(*self.MODULES, None)
            self.slots = self.lib.dcpc_hook(names)
        return self.slots

    def mark(self, text: str) -> None:
        if self.lib is not None:
            self.lib.dcpc_mark(text.encode())


COUNTER: Counter | None = None


def make_impl(kind: str):
    return CudaCoreImpl() if kind == "cuda-core" else OursImpl()


def _graphs(impl, rel: Releases, graphs: int, per_graph: int, spin_us: int) -> list:
    hs = []
    for _ in range(graphs):
        payloads = rel.make(per_graph)
        hs.append(impl.graph(payloads, spin_us))
        del payloads
    if COUNTER is not None:
        COUNTER.hook()  # the modules that add pending calls are loaded by now
    return hs


def _ms(t_ns: int) -> float:
    return round(t_ns / 1e6, 3)


def scenario_a(impl, rel: Releases, main: int) -> dict:
    """A. Burst: 64 graphs x 16 payloads, every other one launched (no wait), all destroyed."""
    graphs, per_graph = 64, 16
    hs = _graphs(impl, rel, graphs, per_graph, spin_us=0)
    for k, h in enumerate(hs):
        if k % 2 == 0:
            impl.launch(h)  # launched, not waited for
    for h in hs:
        impl.drop(h)
    t_destroyed = time.perf_counter_ns()
    during = rel.count()
    del hs, h
    ok = rel.wait_all(20.0)  # sleeps only: no entry point
    last = max(rel.t.values()) if rel.t else t_destroyed
    return {
        "payloads": rel.made,
        "released": rel.count(),
        "all_released": ok,
        "released_before_last_destroy_returned": during,
        "ms_last_destroy_to_last_release": _ms(last - t_destroyed),
        **rel.threads(main),
    }


def _calibrate(fn, seconds: float) -> int:
    """Iterations of ``for _ in repeat(None, n): fn()`` (``pass`` when fn is None)
    that take about `seconds`."""
    n = 1000
    while True:
        t0 = time.perf_counter()
        if fn is None:
            for _ in itertools.repeat(None, n):
                pass
        else:
            for _ in itertools.repeat(None, n):
                fn()
        dt = time.perf_counter() - t0
        if dt > 0.05:
            return max(1, int(n * seconds / dt))
        n *= 4


def scenario_b(impl, rel: Releases, main: int, form: str) -> dict:
    """B. gh-95820: payloads behind 0.2 s kernels; the main thread then loops for 3 s."""
    graphs, per_graph, spin_us, loop_s = 8, 4, 200_000, 3.0

    body = {
        "pure": None,
        "prop": impl.prop,
        "api": impl.api,
        "entry": impl.entry,
        "sleep": lambda: time.sleep(0),
    }[form]
    n = _calibrate(body, loop_s)  # before any payload exists
    hs = _graphs(impl, rel, graphs, per_graph, spin_us)
    for h in hs:
        impl.launch(h)
    for h in hs:
        impl.drop(h)
    del hs, h
    before_loop = rel.count()
    t0 = time.perf_counter_ns()
    if form == "pure":
        for _ in itertools.repeat(None, n):  # no call, no allocation
            pass
    else:
        for _ in itertools.repeat(None, n):
            body()
    t1 = time.perf_counter_ns()
    during = sum(1 for t in rel.t.values() if t0 <= t <= t1)
    ok = rel.wait_all(10.0)
    after = [t for t in rel.t.values() if t > t1]
    return {
        "form": form,
        "payloads": rel.made,
        "loop_s": round((t1 - t0) / 1e9, 3),
        "iterations": n,
        "released_before_loop": before_loop,
        "released_during_loop": during,
        "released_after_loop": len(after),
        "all_released": ok,
        "ms_loop_end_to_last_release": _ms(max(after) - t1) if after else None,
        **rel.threads(main),
    }


def scenario_c(impl, rel: Releases, main: int) -> dict:
    """C. Saturation: another thread fills the pending-call ring; destructors run into it."""
    graphs, per_graph, spin_us = 8, 4, 100_000
    api = ctypes.CDLL(None)  # CDLL: the GIL is released around each call
    api.Py_AddPendingCall.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    api.Py_AddPendingCall.restype = ctypes.c_int
    ran = [0]

    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
    def noop(_arg):
        ran[0] += 1
        return 0

    fill = {"accepted": 0}

    def filler() -> None:
        while api.Py_AddPendingCall(ctypes.cast(noop, ctypes.c_void_p), None) == 0:
            fill["accepted"] += 1
            if fill["accepted"] > 100_000:
                return
        time.sleep(1.2)  # the main thread sleeps in C meanwhile: nothing drains the ring
        fill["still_full_after_1_2_s"] = (
            api.Py_AddPendingCall(ctypes.cast(noop, ctypes.c_void_p), None) != 0
        )

    hs = _graphs(impl, rel, graphs, per_graph, spin_us)
    for h in hs:
        impl.launch(h)
    for h in hs:
        impl.drop(h)
    del hs, h
    t = threading.Thread(target=filler)
    t.start()
    time.sleep(
        1.3
    )  # one C call: kernels end (8 x 100 ms) and destructors run while the ring is full
    released_while_full = rel.count()
    t.join()
    t_drained = time.perf_counter_ns()
    rel.wait_all(2.0)  # sleeps only: no entry point
    after_drain = rel.count()
    impl.entry()
    rel.wait_all(1.0)
    after_entry = rel.count()
    return {
        "payloads": rel.made,
        "ring_accepted": fill["accepted"],
        "ring_still_full_after_1_2_s": fill.get("still_full_after_1_2_s"),
        "filler_calls_ran": ran[0],
        "released_while_full": released_while_full,
        "released_2s_after_ring_drained_no_entry": after_drain,
        "released_after_one_entry_call": after_entry,
        "never_released": rel.made - after_entry,
        "ms_drain_to_last_release": _ms(max(rel.t.values()) - t_drained) if rel.t else None,
        **rel.threads(main),
    }


_D_ALIVE: list = []  # scenario D's graphs: alive until the interpreter exits


def scenario_d(impl, rel: Releases, main: int) -> dict:
    """D. Shutdown: graphs alive, kernels running, then the interpreter exits."""
    graphs, per_graph, spin_us = 4, 4, 500_000
    hs = _graphs(impl, rel, graphs, per_graph, spin_us)
    for h in hs:
        impl.launch(h)
    _D_ALIVE.extend(hs)  # never dropped: finalization meets them with kernels running
    _D_ALIVE.append(impl)  # nor the driver / device objects they were made with
    del hs, h
    return {
        "payloads": rel.made,
        "graphs_alive_at_exit": graphs,
        "kernel_s_queued": graphs * spin_us / 1e6,
        "released_before_exit": rel.count(),
    }


def scenario_e(impl, rel: Releases, main: int, seconds: float) -> dict:
    """E. Lost-wakeup hunt: short launched graphs while the main thread drains continuously."""
    per_graph, spin_us, produce_s, settle_s = 4, 20, 1.5, 1.0
    rounds = max(1, int(seconds / (produce_s + settle_s + 0.3)))
    stranded_total, rescued, graphs = 0, 0, 0
    per_round = []
    for _ in range(rounds):
        end = time.monotonic() + produce_s
        while time.monotonic() < end:
            payloads = rel.make(per_graph)
            h = impl.graph(payloads, spin_us)
            del payloads
            impl.launch(h)
            impl.drop(h)
            del h
            graphs += 1
            time.sleep(0)  # the main thread drains continuously
        # The GPU is idle within microseconds of the last launch (20 us
        # kernels); then 1 s of sleeping, no entry point: what is still
        # unreleased was lost (only an unrelated enqueue or entry would free it).
        t_end = time.monotonic() + settle_s
        while time.monotonic() < t_end:
            time.sleep(0.001)
        stranded = rel.made - rel.count()
        stranded_total += stranded
        per_round.append(stranded)
        if stranded:
            impl.entry()
            rel.wait_all(0.3)
            rescued += stranded - (rel.made - rel.count())
    never = rel.made - rel.count()
    return {
        "payloads": rel.made,
        "destructors": rel.made,
        "graphs": graphs,
        "rounds": rounds,
        "lost_wakeups": stranded_total,
        "lost_per_million": round(stranded_total * 1e6 / max(1, rel.made), 3),
        "stranded_per_round": per_round,
        "rescued_by_one_entry_call": rescued,
        "never_released": never,
        **rel.threads(main),
    }


_X_ALIVE: list = []  # scenario X's implementation objects: alive until the interpreter exits


def scenario_x(impl, rel: Releases, main: int) -> tuple[dict, object]:
    """X. Exit: 8 graphs x 25 payloads, each behind a 50 ms kernel, launched;
    all destroyed on the script's last line (the returned callable, which the
    child runs after writing its result), then the interpreter exits."""
    graphs, per_graph, spin_us = 8, 25, 50_000
    hs = _graphs(impl, rel, graphs, per_graph, spin_us)
    for h in hs:
        impl.prepare(h)  # cuda-core: instantiate now, so that the launches below follow each other
    t_launch = time.perf_counter_ns()
    for h in hs:
        impl.launch(h)
    t_launched = time.perf_counter_ns()
    _X_ALIVE.append(impl)  # the device, stream and driver objects live until the interpreter exits
    fig = {
        "payloads": rel.made,
        "graphs": graphs,
        "kernel_ms_each": spin_us / 1e3,
        "launch_ns": t_launch,
        "ms_launch_loop": _ms(t_launched - t_launch),
        "pending_call_slots_patched": COUNTER.hook() if COUNTER else None,
    }

    def last_line() -> None:
        if rel.fd is not None:
            os.write(rel.fd, b"last-line %d\n" % time.perf_counter_ns())
        for h in hs:
            impl.drop(h)
        if rel.fd is not None:  # the main thread's last entry point has returned
            os.write(rel.fd, b"last-entry %d\n" % time.perf_counter_ns())
        hs.clear()

    return fig, last_line


def child(
    kind: str, scenario: str, result_path: str, e_seconds: float, release_log: str | None
) -> int:
    """Run one scenario on one implementation; write its figures as JSON."""
    global COUNTER
    main = threading.get_ident()
    fd = (
        os.open(release_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if release_log else None
    )
    rel = Releases(fd)
    t0 = time.perf_counter()
    COUNTER = Counter()
    impl = make_impl(kind)
    info = impl.info()
    last_line = None
    if scenario == "A":
        fig = scenario_a(impl, rel, main)
    elif scenario.startswith("B-"):
        fig = scenario_b(impl, rel, main, scenario[2:])
    elif scenario == "C":
        fig = scenario_c(impl, rel, main)
    elif scenario == "D":
        fig = scenario_d(impl, rel, main)
    elif scenario == "E":
        fig = scenario_e(impl, rel, main, e_seconds)
    elif scenario == "X":
        fig, last_line = scenario_x(impl, rel, main)
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    fig.update(impl.extra())
    out = {
        "info": info,
        "figures": fig,
        "seconds": round(time.perf_counter() - t0, 3),
        "main_thread": main,
    }
    with open(result_path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"[child] {kind} {scenario}: {json.dumps(fig)}", flush=True)
    if fd is not None and last_line is None:
        os.write(fd, b"exit-begins\n")
    if last_line is not None:
        last_line()  # the script's last line: everything after it is the interpreter's exit
    return 0


# =====================================================================
# The parent: preflight, run everything, write JSON and Markdown
# =====================================================================
def gpu_preflight() -> dict:
    """Driver version and device name through libcuda, or Unavailable."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        raise Unavailable(f"no NVIDIA driver: libcuda.so.1 cannot be opened ({e})") from None
    rc = cuda.cuInit(0)
    if rc != 0:
        raise Unavailable(f"no usable GPU: cuInit returned CUresult {rc}")
    n = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(n)) != 0 or n.value < 1:
        raise Unavailable("no CUDA device: cuDeviceGetCount found none")
    v = ctypes.c_int(0)
    cuda.cuDriverGetVersion(ctypes.byref(v))
    dev = ctypes.c_int(0)
    cuda.cuDeviceGet(ctypes.byref(dev), 0)
    name = ctypes.create_string_buffer(256)
    cuda.cuDeviceGetName(name, 255, dev)
    info = {
        "driver_api_version": v.value,
        "name": name.value.decode(errors="replace"),
        "devices": n.value,
    }
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        info["nvidia_smi"] = smi.stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        info["nvidia_smi"] = f"unavailable: {e}"
    return info


def _env_with_path(path: str | None) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    if path:
        env["PYTHONPATH"] = path + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _probe_import(code: str, env: dict) -> tuple[bool, str]:
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    if p.returncode != 0:
        lines = (p.stderr or p.stdout).strip().splitlines()
        return False, lines[-1] if lines else f"exit status {p.returncode}"
    return True, p.stdout.strip()


def implementations(cuda_core: list[str], ours: list[str]) -> list[dict]:
    """Check every implementation imports; Unavailable names the first that does not."""
    impls = []
    for spec in cuda_core:
        label, _, path = spec.partition("=")
        path = "" if path in ("", "env") else str(Path(path).resolve())
        ok, out = _probe_import(
            "import cuda.core, cuda.bindings as b; print(cuda.core.__version__, b.__version__)",
            _env_with_path(path),
        )
        if not ok:
            raise Unavailable(
                (
                    f"no cuda-core to compare ({label or 'cuda-core'} at "
                    f"{path or 'the environment'}): {out}"
                )
            )
        version, bindings = out.split()[:2]
        impls.append(
            {
                "id": f"cuda-core-{version}",
                "label": f"cuda-core {version}",
                "kind": "cuda-core",
                "version": version,
                "cuda_bindings": bindings,
                "path": path,
                "module_layout": "cu" + bindings.split(".")[0],
                "env": {},
            }
        )
    for variant in ours:
        env = _env_with_path(None)
        env["DEFERRED_CLEANUP_VARIANT"] = variant
        ok, out = _probe_import("import deferred_cleanup as d; print(d.variant())", env)
        if not ok:
            raise Unavailable(f"deferred_cleanup (variant {variant}) does not import: {out}")
        if out != variant:
            raise Unavailable(f"deferred_cleanup has no variant {variant!r} (it runs {out!r})")
        impls.append(
            {
                "id": f"ours-{variant}",
                "label": f"ours ({variant})",
                "kind": "ours",
                "variant": variant,
                "path": "",
                "env": {"DEFERRED_CLEANUP_VARIANT": variant},
            }
        )
    return impls


def _signal_name(rc: int) -> str | None:
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return None


def counted_calls(
    pcc_path: Path, releases: list[tuple[int, int]], last_entry_ns: int | None = None
) -> dict:
    """What tools/pending_call_counter.c recorded in one child, and how many of
    ``releases`` ((t_ns, thread) pairs) happened inside a run of a counted
    pending call on the same thread.  Main-thread adds are split: inside a run
    of a counted call (a drain that reschedules), and, when ``last_entry_ns``
    (perf_counter_ns after the main thread's last API entry point returned) is
    given, outside any run at or after it (neither an entry point nor a
    drain).  Empty when the child counted nothing."""
    if not pcc_path.exists():
        return {}
    try:
        d = json.loads(pcc_path.read_text())
    except ValueError:
        return {"pending_call_counter": "unreadable"}
    main = d["main_thread"]
    adds = [e for e in d["events"] if e[2] == 0]
    begins: dict[int, list[int]] = {}
    spans: list[tuple[int, int, int]] = []
    for t, thread, kind, _rc, _fin in sorted(d["events"]):
        if kind == 1:
            begins.setdefault(thread, []).append(t)
        elif kind == 2 and begins.get(thread):
            spans.append((begins[thread].pop(), t, thread))
    inside = sum(1 for t, th in releases if any(b <= t <= e and th == st for b, e, st in spans))
    on_main = [e for e in adds if e[1] == main]
    in_run = [e for e in on_main if any(b <= e[0] <= end and main == st for b, end, st in spans)]
    return {
        "slots_patched": d["hooked"],
        "calls_added": sum(1 for e in adds if e[3] == 0),
        "calls_refused": sum(1 for e in adds if e[3] != 0),
        "added_on_main": sum(1 for e in adds if e[1] == main),
        "added_off_main": sum(1 for e in adds if e[1] != main),
        "added_on_main_in_drain": len(in_run),
        "added_on_main_after_last_entry": (
            None
            if last_entry_ns is None
            else sum(1 for e in on_main if e not in in_run and e[0] >= last_entry_ns)
        ),
        "added_while_finalizing": sum(1 for e in adds if e[4] == 1),
        "calls_ran": sum(1 for e in d["events"] if e[2] == 1),
        "released_in_counted_call": inside,
        "overflow": d["overflow"],
    }


def _last_entry(rlog: Path) -> int | None:
    """Scenario X's last-entry mark (after the last drop returned), if any."""
    for line in rlog.read_text().splitlines() if rlog.exists() else []:
        parts = line.split()
        if len(parts) == 2 and parts[0] == "last-entry":
            return int(parts[1])
    return None


def _release_log(rlog: Path) -> tuple[list[tuple[int, int, int]], int | None, bool]:
    """(i, t_ns, thread) of each release line, the last-line time if marked,
    and whether the exit marker was reached; releases are in file order."""
    rows, last, exit_seen = [], None, False
    for line in rlog.read_text().splitlines() if rlog.exists() else []:
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "last-line":
            last = int(parts[1])
        elif parts[0] == "exit-begins":
            exit_seen = True
        elif parts[0].isdigit() and len(parts) == 3:
            rows.append((int(parts[0]), int(parts[1]), int(parts[2])))
    return rows, last, exit_seen


def exit_figures(fig: dict, rlog: Path, pcc: Path, main: int | None) -> None:
    """Scenario X's figures of one run, from its release log and counter file."""
    rows, last, _ = _release_log(rlog)
    after = [r for r in rows if last is not None and r[1] >= last]
    fig["released_before_last_line"] = len(rows) - len(after)
    fig["released_at_exit"] = len(after)
    fig["never_released"] = fig.get("payloads", 0) - len(rows)
    fig["released_at_exit_on_main"] = sum(1 for r in after if main is not None and r[2] == main)
    if after:
        fig["ms_last_line_to_first_exit_release"] = _ms(min(r[1] for r in after) - last)
        fig["ms_last_line_to_last_exit_release"] = _ms(max(r[1] for r in after) - last)
    if last is not None and "launch_ns" in fig:
        fig["ms_launch_to_last_line"] = _ms(last - fig["launch_ns"])
    fig.update(counted_calls(pcc, [(r[1], r[2]) for r in after], _last_entry(rlog)))


def run_one(
    impl: dict, scenario: str, out: Path, timeout_s: float, e_seconds: float, run: int | None = None
) -> dict:
    """One scenario of one implementation in its own subprocess; the outcome is data."""
    tag = f"{scenario}--{impl['id']}" + (f"--{run}" if run is not None else "")
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    result = logs / f"{tag}.json"
    rlog = logs / f"{tag}.releases"
    pcc = logs / f"{tag}.pending-calls.json"
    for f in (result, rlog, pcc):
        if f.exists():
            f.unlink()
    env = _env_with_path(impl["path"] or None)
    env.update(impl["env"])
    env["DCPC_OUT"] = str(pcc)
    if impl["kind"] == "ours" and scenario in ("D", "X"):
        env["DC_STATS_AT_EXIT"] = str(logs / f"{tag}.stats-at-exit.json")
    argv = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        impl["kind"],
        scenario,
        str(result),
        "--e-seconds",
        str(e_seconds),
    ]
    if scenario in ("D", "X"):
        argv += ["--release-log", str(rlog)]
    t0 = time.monotonic()
    rec = {
        "scenario": scenario,
        "impl": impl["id"],
        "log": f"logs/{tag}.log",
        "timeout_s": round(timeout_s, 1),
    }
    with open(logs / f"{tag}.log", "w") as logf:
        logf.write(f"$ {' '.join(argv)}\n")
        logf.flush()
        p = subprocess.Popen(
            argv, stdout=logf, stderr=subprocess.STDOUT, env=env, cwd=out, start_new_session=True
        )
        try:
            rc = p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            rc = p.wait()
            rec["status"] = "hung"
    rec["seconds"] = round(time.monotonic() - t0, 3)
    rec["rc"] = rc
    rec["signal"] = _signal_name(rc)
    data = json.loads(result.read_text()) if result.exists() else None
    if data:
        rec["figures"] = data["figures"]
        rec["info"] = data["info"]
        rec["main_thread"] = data.get("main_thread")
    if scenario == "X":
        fig = rec.setdefault("figures", {})
        exit_figures(fig, rlog, pcc, rec.get("main_thread"))
        fig["exit_status"] = rc
        stats = logs / f"{tag}.stats-at-exit.json"
        if stats.exists():
            try:
                s = json.loads(stats.read_text())
                fig["stats_at_exit"] = {
                    k: s[k]
                    for k in (
                        "enqueued",
                        "cleaned",
                        "leaked_at_shutdown",
                        "cleanups_after_shutdown",
                    )
                    if k in s
                }
            except ValueError:
                fig["stats_at_exit"] = "unreadable"
    if scenario == "D":
        rec.setdefault("figures", {})
        lines = rlog.read_text().splitlines() if rlog.exists() else []
        exit_at = lines.index("exit-begins") if "exit-begins" in lines else None
        after = lines[exit_at + 1 :] if exit_at is not None else []
        fig = rec["figures"]
        fig["released_during_shutdown"] = len([x for x in after if x and x[0].isdigit()])
        if "payloads" in fig:
            fig["leaked"] = (
                fig["payloads"]
                - fig.get("released_before_exit", 0)
                - fig["released_during_shutdown"]
            )
        fig["exit_status"] = rc
        fig["exit_signal"] = rec["signal"]
        rows, _, _ = _release_log(rlog)
        exit_rows = (
            rows[len(rows) - fig["released_during_shutdown"] :]
            if fig["released_during_shutdown"]
            else []
        )
        fig.update(counted_calls(pcc, [(r[1], r[2]) for r in exit_rows]))
        stats = logs / f"{tag}.stats-at-exit.json"
        if stats.exists():
            try:
                s = json.loads(stats.read_text())
                fig["stats_at_exit"] = {
                    k: s[k]
                    for k in (
                        "enqueued",
                        "cleaned",
                        "leaked_at_shutdown",
                        "cleanups_after_shutdown",
                    )
                    if k in s
                }
            except ValueError:
                fig["stats_at_exit"] = "unreadable"
    if "status" not in rec:
        if data is None:
            rec["status"] = "crashed" if rec["signal"] else "error"
        elif scenario == "D":
            rec["status"] = "ok" if rc == 0 else ("crashed" if rec["signal"] else "error")
        else:
            rec["status"] = "ok" if rc == 0 else ("crashed" if rec["signal"] else "error")
    if rec["status"] != "ok":
        tail = (logs / f"{tag}.log").read_text(errors="replace").strip().splitlines()[-3:]
        rec["why"] = " | ".join(tail)[-300:]
    return rec


#: Scenario X's per-run figures that add up over the runs.
X_SUMS = [
    "payloads",
    "released_before_last_line",
    "released_at_exit",
    "released_at_exit_on_main",
    "never_released",
    "calls_added",
    "calls_refused",
    "added_on_main",
    "added_off_main",
    "added_while_finalizing",
    "calls_ran",
    "released_in_counted_call",
]


def run_x(impl: dict, out: Path, deadline: float, e_seconds: float) -> dict:
    """Scenario X: X_RUNS processes of one implementation, and their sum."""
    runs = []
    for k in range(1, X_RUNS + 1):
        left = deadline - time.monotonic()
        if left < 5:
            break
        runs.append(run_one(impl, "X", out, min(TIMEOUT_S["X"], left), e_seconds, run=k))
    figs = [r.get("figures", {}) for r in runs]
    total: dict = {"runs": len(runs)}
    for key in X_SUMS:
        vals = [f[key] for f in figs if isinstance(f.get(key), int)]
        if vals:
            total[key] = sum(vals)
    total["released_at_exit_per_run"] = [f.get("released_at_exit") for f in figs]
    ms = [
        f["ms_last_line_to_last_exit_release"]
        for f in figs
        if "ms_last_line_to_last_exit_release" in f
    ]
    if ms:
        total["ms_last_line_to_last_exit_release_max"] = max(ms)
    for key in ("ms_launch_to_last_line", "ms_launch_loop"):
        ms = [f[key] for f in figs if key in f]
        if ms:
            total[key + "_max"] = max(ms)
    total["exit_statuses"] = sorted({r.get("rc") for r in runs}, key=str)
    stats = [f["stats_at_exit"] for f in figs if isinstance(f.get("stats_at_exit"), dict)]
    if stats:
        total["stats_at_exit"] = {k: sum(s.get(k, 0) for s in stats) for k in stats[0]}
    bad = [r for r in runs if r.get("status") != "ok"]
    rec = {
        "scenario": "X",
        "impl": impl["id"],
        "status": "ok" if runs and not bad else (bad[0]["status"] if bad else "not run"),
        "seconds": round(sum(r.get("seconds", 0) for r in runs), 3),
        "figures": total,
        "runs": runs,
        "log": runs[0]["log"] if runs else f"logs/X--{impl['id']}--1.log",
    }
    if len(runs) < X_RUNS:
        rec["why"] = f"{len(runs)} of {X_RUNS} runs: the run's budget was spent"
    elif bad:
        rec["why"] = bad[0].get("why", "")
    return rec


def our_commit() -> str:
    if os.environ.get("DC_COMMIT"):
        return os.environ["DC_COMMIT"]
    try:
        return (
            subprocess.run(
                ["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
            or "unknown"
        )
    except OSError:
        return "unknown"


def parent(a: argparse.Namespace) -> int:
    gpu = gpu_preflight()
    impls = implementations(a.cuda_core or ["env"], a.ours)
    wanted = a.scenarios.split(",")  # run in the order given (e.g. X first)
    scenarios = [
        s for w in wanted for s in SCENARIOS if s == w or (s.split("-")[0] == w and s != w)
    ]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    data = {
        "schema": 1,
        "started_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "hostname": socket.gethostname(),
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
        },
        "gpu": gpu,
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "our_commit": our_commit(),
        "implementations": [{k: v for k, v in i.items() if k != "env"} for i in impls],
        "scenarios": [
            {"id": s, "title": SCENARIOS[s], "timeout_s": TIMEOUT_S[s]}
            for s in SCENARIOS
            if s in scenarios
        ],  # table order, whatever the run order
        "e_seconds": a.e_seconds,
        "results": [],
    }
    deadline = time.monotonic() + a.budget_s
    for s in scenarios:
        for impl in impls:
            left = deadline - time.monotonic()
            if left < 5:
                data["results"].append(
                    {
                        "scenario": s,
                        "impl": impl["id"],
                        "status": "not run",
                        "why": f"the run's budget of {a.budget_s} s was spent",
                    }
                )
                continue
            if s == "X":
                rec = run_x(impl, out, deadline, a.e_seconds)
            else:
                rec = run_one(impl, s, out, min(TIMEOUT_S[s], left), a.e_seconds)
            print(
                f"[gpu-compare] {s:8} {impl['id']:22} {rec['status']:8} {rec['seconds']:7.1f} s",
                flush=True,
            )
            data["results"].append(rec)
    data["finished_utc"] = datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"
    )
    (out / "gpu-compare.json").write_text(json.dumps(data, indent=1) + "\n")
    (out / "gpu-compare.md").write_text(render_markdown(data))
    print(f"[gpu-compare] wrote {out / 'gpu-compare.json'} and {out / 'gpu-compare.md'}")
    return 0


# =====================================================================
# The table: one row per (scenario, implementation), from the JSON alone
# =====================================================================
def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def summary(scenario: str, fig: dict) -> str:
    """The figures of one result as one short line (the table's last column)."""
    f = {k: _fmt(v) for k, v in fig.items()}

    def g(key: str) -> str:
        return f.get(key, "-")

    threads = f"released on main {g('released_on_main')}, off main {g('released_off_main')}"
    if scenario == "A":
        s = f"released {g('released')}/{g('payloads')}; "
        if fig.get("released_before_last_destroy_returned") == fig.get("payloads"):
            s += "all of them before the last destroy returned"
        else:
            s += (
                f"{g('released_before_last_destroy_returned')} before the last destroy returned, "
                "the last "
                f"{g('ms_last_destroy_to_last_release')} ms after it"
            )
        s += f"; {threads}"
        if "destructors_on_main" in fig:
            s += (
                f"; ours: destructor threads {g('destructor_threads')}, destructors on the main "
                "thread "
                f"{g('destructors_on_main')}"
            )
    elif scenario.startswith("B-"):
        s = (
            f"released during the {g('loop_s')} s loop "
            f"{g('released_during_loop')}/{g('payloads')}, after it "
            f"{g('released_after_loop')}"
        )
        if fig.get("released_after_loop"):
            s += f" (the last {g('ms_loop_end_to_last_release')} ms after its end)"
        s += f"; {threads}"
    elif scenario == "C":
        s = (
            f"ring took {g('ring_accepted')} calls; released while full "
            f"{g('released_while_full')}, "
            "2 s after it drained (no entry call) "
            f"{g('released_2s_after_ring_drained_no_entry')}, after one "
            f"entry call {g('released_after_one_entry_call')}/{g('payloads')}; never "
            f"{g('never_released')}"
        )
    elif scenario == "D":
        s = (
            "exit status "
            f"{g('exit_status')}{' (' + g('exit_signal') + ')' if fig.get('exit_signal') else ''}; "
            f"released before exit {g('released_before_exit')}, during shutdown "
            f"{g('released_during_shutdown')}, leaked {g('leaked')} of {g('payloads')}"
        )
        if "calls_added" in fig:
            s += (
                f"; Py_AddPendingCall from the module: {g('calls_added')} accepted, "
                f"{g('calls_refused')} "
                f"refused, {g('added_while_finalizing')} while finalizing, {g('calls_ran')} ran"
            )
        if isinstance(fig.get("stats_at_exit"), dict):
            st = fig["stats_at_exit"]
            s += "; ours at exit: " + ", ".join(
                f"{k.replace('_', ' ')} {_fmt(v)}" for k, v in st.items()
            )
        return s
    elif scenario == "X":
        s = (
            f"released at exit {g('released_at_exit')}/{g('payloads')} over {g('runs')} runs (per "
            "run: "
            f"{', '.join(_fmt(v) for v in fig.get('released_at_exit_per_run', []))}), "
            f"{g('released_at_exit_on_main')} of them on the main thread, the last "
            f"{g('ms_last_line_to_last_exit_release_max')} ms after the last line at most; "
            "released before the "
            f"last line {g('released_before_last_line')}; never released {g('never_released')}; "
            "the 8 "
            f"launches took {g('ms_launch_loop_max')} ms at most, launch to last line "
            f"{g('ms_launch_to_last_line_max')} ms at most"
        )
        if "calls_added" in fig:
            s += (
                f"; Py_AddPendingCall from the module: {g('calls_added')} accepted "
                f"({g('added_on_main')} on the "
                f"main thread, {g('added_off_main')} off it, {g('added_while_finalizing')} while "
                "finalizing), "
                f"{g('calls_refused')} refused, {g('calls_ran')} ran; releases at exit inside a "
                "counted call "
                f"{g('released_in_counted_call')}"
            )
        if isinstance(fig.get("stats_at_exit"), dict):
            st = fig["stats_at_exit"]
            s += "; ours at exit: " + ", ".join(
                f"{k.replace('_', ' ')} {_fmt(v)}" for k, v in st.items()
            )
        return s
    elif scenario == "E":
        s = (
            f"{g('destructors')} destructors in {g('graphs')} graphs, {g('rounds')} rounds; lost "
            "wakeups "
            f"{g('lost_wakeups')} ({g('lost_per_million')} per million); never released "
            f"{g('never_released')}"
        )
    else:
        s = ", ".join(f"{k} {v}" for k, v in f.items())
    if "direct_drains" in fig:
        s += ("," if "; ours: " in s else "; ours:") + (
            f" pending calls {g('pending_calls')}, direct drains {g('direct_drains')}, "
            f"schedule failures {g('schedule_failures')}"
        )
    return s


def outcome(rec: dict) -> str:
    """The outcome column: ok, or what went wrong, as a result."""
    st = rec.get("status", "?")
    if st == "hung":
        return f"hung (killed after {rec.get('timeout_s')} s)"
    if st == "crashed":
        return f"crashed ({rec.get('signal')})"
    if st == "error":
        return f"error (exit status {rec.get('rc')})"
    return st


def table_rows(data: dict) -> tuple[list[str], list[list[str]]]:
    """Header and rows: every scenario of the JSON, every implementation, in order.

    A result missing from the JSON gets a row saying so: the table never
    silently drops an implementation.
    """
    labels = {i["id"]: i["label"] for i in data["implementations"]}
    by = {(r["scenario"], r["impl"]): r for r in data["results"]}
    rows = []
    for sc in data["scenarios"]:
        for impl in data["implementations"]:
            r = by.get((sc["id"], impl["id"]))
            if r is None:
                rows.append([sc["id"], labels[impl["id"]], "missing from the JSON", "-"])
                continue
            figs = summary(sc["id"], r["figures"]) if r.get("figures") else r.get("why", "-")
            if r.get("figures") and r.get("status") not in ("ok", None) and r.get("why"):
                figs += f"; {r['why']}"
            rows.append([sc["id"], labels[impl["id"]], outcome(r), figs])
    return ["scenario", "implementation", "outcome", "figures"], rows


def header_lines(data: dict) -> list[str]:
    """What was measured where, as Markdown bullet lines."""
    gpu, py = data["gpu"], data["python"]
    impls = "; ".join(
        i["label"]
        + (
            f" (cuda-bindings {i['cuda_bindings']}, {i['module_layout']})"
            if i["kind"] == "cuda-core"
            else ""
        )
        for i in data["implementations"]
    )
    return [
        f"- GPU: {gpu.get('name')} (driver API {gpu.get('driver_api_version')}; nvidia-smi: "
        f"{gpu.get('nvidia_smi')})",
        f"- Machine: {data['machine']['platform']}, {data['machine']['cpu_count']} CPUs",
        f"- Python: {py['implementation']} {py['version']}",
        f"- Implementations: {impls}",
        f"- Our commit: {data['our_commit']}; run {data['started_utc']} to "
        f"{data.get('finished_utc')}",
    ] + (
        [
            f"- Provenance: measured at commit {data['provenance']['commit'][:12]}; sources "
            f"{', '.join(data['provenance']['globs'])}, sha256 "
            f"{data['provenance']['sources_sha256'][:16]}"
        ]
        if data.get("provenance")
        else []
    )


def render_markdown(data: dict) -> str:
    """The Markdown table (gpu-compare.md), generated from the JSON alone."""
    head, rows = table_rows(data)
    esc = [[c.replace("|", "\\|") for c in r] for r in rows]
    lines = ["# Side by side with cuda-core", "", *header_lines(data), "", "Scenarios:", ""]
    lines += [f"- **{s['id']}**: {s['title']}" for s in data["scenarios"]]
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in esc]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(REPO / "build" / "gpu-compare"), help="output folder")
    ap.add_argument(
        "--cuda-core",
        action="append",
        metavar="LABEL=PATH",
        help="a cuda-core to compare: PATH is prepended to PYTHONPATH ('env' or empty: the "
        "interpreter's own); repeatable; default: the interpreter's own",
    )
    ap.add_argument(
        "--ours",
        nargs="+",
        default=["reference", "cuda-core-1.2", "cuda-core-1.2-fixed"],
        metavar="VARIANT",
        help="DEFERRED_CLEANUP_VARIANT values to run our cuda driver in",
    )
    ap.add_argument(
        "--scenarios", default="A,B,C,D,E", help="comma-separated: A, B (all forms), B-pure, ..., E"
    )
    ap.add_argument(
        "--budget-s", type=float, default=480.0, help="wall-clock budget of the whole run (seconds)"
    )
    ap.add_argument(
        "--e-seconds", type=float, default=24.0, help="scenario E's production time (seconds)"
    )
    ap.add_argument(
        "--render",
        metavar="JSON",
        help="only write the Markdown table of an existing JSON next to it (gpu-compare.md)",
    )
    ap.add_argument(
        "--child", nargs=3, metavar=("KIND", "SCENARIO", "RESULT"), help=argparse.SUPPRESS
    )
    ap.add_argument("--release-log", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.render:
        src = Path(a.render)
        (src.parent / "gpu-compare.md").write_text(render_markdown(json.loads(src.read_text())))
        return 0
    if a.child:
        return child(a.child[0], a.child[1], a.child[2], a.e_seconds, a.release_log)
    try:
        return parent(a)
    except Unavailable as e:
        print(f"gpu-compare: not run: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
