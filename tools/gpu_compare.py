#!/usr/bin/env python3
"""Side by side with cuda-core on a real GPU (``make gpu-compare``).

Runs the same five workloads (scenarios A-E below) on the shipped cuda-core
wheels and on this project's ``cuda`` driver, each scenario of each
implementation in its own subprocess with a timeout, and writes one JSON file
and a Markdown table generated from it::

    python3 tools/gpu_compare.py --out DIR \\
        [--cuda-core LABEL=PATH ...]     # PATH '' or 'env': the interpreter's own cuda-core
        [--ours VARIANT ...]             # DEFERRED_CLEANUP_VARIANT values (reference, cuda-core-1.2, seed)
        [--scenarios A,B,C,D,E] [--budget-s 480] [--e-seconds 24]
    python3 tools/gpu_compare.py --render DIR/gpu-compare.json   # the table again, from the JSON alone

``DIR`` receives ``gpu-compare.json``, ``gpu-compare.md`` and ``logs/`` (one
raw log per subprocess: its stdout and stderr).  Exit status: 0 when every
subprocess ran (a crash or hang of an implementation in a scenario is a
*result*, recorded as such, not a failure of the script); 2, with one line
saying why, when there is no NVIDIA driver, no GPU, no cuda-core or no
``deferred_cleanup`` to compare; 1 for a bug of the script itself.

The payload attached to a graph is a Python object whose release is observed
with :func:`weakref.finalize` (``atexit`` off): the time and the thread of each
release.  On cuda-core a payload is a memset node's ``dst_owner`` (cuda-core
keeps it in a CUDA user object); on ours it is ``Graph.attach(payload)``.
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
import weakref
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
}
#: Subprocess timeout per scenario (seconds); the whole run also has a budget.
TIMEOUT_S = {"A": 40, "B-pure": 25, "B-prop": 25, "B-api": 25, "B-entry": 25, "B-sleep": 25, "C": 30,
             "D": 30, "E": 75}

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
    """A payload: a plain object with a weak-reference slot."""

    __slots__ = ("i", "__weakref__")

    def __init__(self, i: int) -> None:
        self.i = i


class Releases:
    """Observes payload releases with weakref.finalize: time (ns) and thread.

    ``fd``, if given, also gets one line ``<i> <t_ns> <thread>`` per release,
    written at once (scenario D: releases during interpreter shutdown).
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
            p = Payload(self.made)
            f = weakref.finalize(p, self._released, self.made)
            f.atexit = False  # observe real releases only
            self.made += 1
            out.append(p)
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
        return {"released_on_main": on_main, "released_off_main": len(self.thread) - on_main,
                "release_threads": len(set(self.thread.values()))}


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
        self.kernel = cc.ObjectCode.from_ptx(SPIN_PTX.encode()).get_kernel("dc_spin")  # str would be a path
        self.config = cc.LaunchConfig(grid=1, block=1)
        self.buf = self.dev.allocate(1 << 16, stream=self.stream)  # memset targets; lives as long as the process
        self.stream.sync()
        self.ptr = int(self.buf.handle)
        try:
            import numpy as np

            self._arg = np.uint64
        except ImportError:
            self._arg = ctypes.c_uint64

    def info(self) -> dict:
        from cuda import bindings

        return {"cuda_core": self.cc.__version__, "cuda_bindings": bindings.__version__,
                "module_layout": "cu" + bindings.__version__.split(".")[0],
                "cuda_core_path": str(Path(self.cc.__file__).parent)}

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

    def launch(self, h) -> None:
        h[1] = h[0].instantiate()
        h[1].launch(self.stream)

    def drop(self, h) -> None:
        if h[1] is not None:
            h[1].close()
        h[0] = h[1] = None

    def prop(self) -> None:
        self.dev.arch  # a property of the Device object held since setup

    def api(self) -> None:
        self.cc.Device().arch  # a cheap call: Device() for the current device, then the property

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
        return {"variant": self.dc.variant(), "driver_version": d.driver_version, "gpu": d.device_name,
                "package_path": str(Path(self.dc.__file__).parent)}

    def graph(self, payloads: list, spin_us: int):
        g = self.driver(spin_us).create_graph()
        for p in payloads:
            g.attach(p)
        return g

    def launch(self, g) -> None:
        g.instantiate()

    def drop(self, g) -> None:
        g.destroy()

    def prop(self) -> None:
        self.driver(0).name  # a property read, not an entry point

    def api(self) -> None:
        self.dc.poll()  # the cheapest entry point

    def entry(self) -> None:
        self.driver(0).create_graph().destroy()

    def extra(self) -> dict:
        after = self.dc.counters()
        keys = ["enqueued", "cleaned", "pending_calls", "drain_cycles", "direct_drains", "schedule_failures",
                "retries", "destructors_on_main"]
        out = {k: after[k] - self.before[k] for k in keys if k in after}
        out["destructor_threads"] = len(self.dc._native.destructor_threads())
        return out


def make_impl(kind: str):
    return CudaCoreImpl() if kind == "cuda-core" else OursImpl()


def _graphs(impl, rel: Releases, graphs: int, per_graph: int, spin_us: int) -> list:
    hs = []
    for _ in range(graphs):
        payloads = rel.make(per_graph)
        hs.append(impl.graph(payloads, spin_us))
        del payloads
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
    return {"payloads": rel.made, "released": rel.count(), "all_released": ok,
            "released_before_last_destroy_returned": during,
            "ms_last_destroy_to_last_release": _ms(last - t_destroyed), **rel.threads(main)}


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

    body = {"pure": None, "prop": impl.prop, "api": impl.api, "entry": impl.entry, "sleep": lambda: time.sleep(0)}[form]
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
    return {"form": form, "payloads": rel.made, "loop_s": round((t1 - t0) / 1e9, 3), "iterations": n,
            "released_before_loop": before_loop, "released_during_loop": during,
            "released_after_loop": len(after), "all_released": ok,
            "ms_loop_end_to_last_release": _ms(max(after) - t1) if after else None, **rel.threads(main)}


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
        fill["still_full_after_1_2_s"] = api.Py_AddPendingCall(ctypes.cast(noop, ctypes.c_void_p), None) != 0

    hs = _graphs(impl, rel, graphs, per_graph, spin_us)
    for h in hs:
        impl.launch(h)
    for h in hs:
        impl.drop(h)
    del hs, h
    t = threading.Thread(target=filler)
    t.start()
    time.sleep(1.3)  # one C call: kernels end (8 x 100 ms) and destructors run while the ring is full
    released_while_full = rel.count()
    t.join()
    t_drained = time.perf_counter_ns()
    rel.wait_all(2.0)  # sleeps only: no entry point
    after_drain = rel.count()
    impl.entry()
    rel.wait_all(1.0)
    after_entry = rel.count()
    return {"payloads": rel.made, "ring_accepted": fill["accepted"],
            "ring_still_full_after_1_2_s": fill.get("still_full_after_1_2_s"), "filler_calls_ran": ran[0],
            "released_while_full": released_while_full,
            "released_2s_after_ring_drained_no_entry": after_drain,
            "released_after_one_entry_call": after_entry, "never_released": rel.made - after_entry,
            "ms_drain_to_last_release": _ms(max(rel.t.values()) - t_drained) if rel.t else None,
            **rel.threads(main)}


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
    return {"payloads": rel.made, "graphs_alive_at_exit": graphs, "kernel_s_queued": graphs * spin_us / 1e6,
            "released_before_exit": rel.count()}


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
    return {"payloads": rel.made, "destructors": rel.made, "graphs": graphs, "rounds": rounds,
            "lost_wakeups": stranded_total, "lost_per_million": round(stranded_total * 1e6 / max(1, rel.made), 3),
            "stranded_per_round": per_round, "rescued_by_one_entry_call": rescued, "never_released": never,
            **rel.threads(main)}


def child(kind: str, scenario: str, result_path: str, e_seconds: float, release_log: str | None) -> int:
    """Run one scenario on one implementation; write its figures as JSON."""
    main = threading.get_ident()
    fd = os.open(release_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if release_log else None
    rel = Releases(fd)
    t0 = time.perf_counter()
    impl = make_impl(kind)
    info = impl.info()
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
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    fig.update(impl.extra())
    out = {"info": info, "figures": fig, "seconds": round(time.perf_counter() - t0, 3)}
    with open(result_path, "w") as f:
        json.dump(out, f, indent=1)
    if fd is not None:
        os.write(fd, b"exit-begins\n")
    print(f"[child] {kind} {scenario}: {json.dumps(fig)}", flush=True)
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
    info = {"driver_api_version": v.value, "name": name.value.decode(errors="replace"), "devices": n.value}
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
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
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
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
            "import cuda.core, cuda.bindings as b; print(cuda.core.__version__, b.__version__)", _env_with_path(path))
        if not ok:
            raise Unavailable(f"no cuda-core to compare ({label or 'cuda-core'} at {path or 'the environment'}): {out}")
        version, bindings = out.split()[:2]
        impls.append({"id": f"cuda-core-{version}", "label": f"cuda-core {version}", "kind": "cuda-core",
                      "version": version, "cuda_bindings": bindings, "path": path,
                      "module_layout": "cu" + bindings.split(".")[0], "env": {}})
    for variant in ours:
        env = _env_with_path(None)
        env["DEFERRED_CLEANUP_VARIANT"] = variant
        ok, out = _probe_import("import deferred_cleanup as d; print(d.variant())", env)
        if not ok:
            raise Unavailable(f"deferred_cleanup (variant {variant}) does not import: {out}")
        if out != variant:
            raise Unavailable(f"deferred_cleanup has no variant {variant!r} (it runs {out!r})")
        impls.append({"id": f"ours-{variant}", "label": f"ours ({variant})", "kind": "ours", "variant": variant,
                      "path": "", "env": {"DEFERRED_CLEANUP_VARIANT": variant}})
    return impls


def _signal_name(rc: int) -> str | None:
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return None


def run_one(impl: dict, scenario: str, out: Path, timeout_s: float, e_seconds: float) -> dict:
    """One scenario of one implementation in its own subprocess; the outcome is data."""
    tag = f"{scenario}--{impl['id']}"
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    result = logs / f"{tag}.json"
    rlog = logs / f"{tag}.releases"
    for f in (result, rlog):
        if f.exists():
            f.unlink()
    env = _env_with_path(impl["path"] or None)
    env.update(impl["env"])
    if impl["kind"] == "ours" and scenario == "D":
        env["DC_STATS_AT_EXIT"] = str(logs / f"{tag}.stats-at-exit.json")
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", impl["kind"], scenario, str(result),
            "--e-seconds", str(e_seconds)]
    if scenario == "D":
        argv += ["--release-log", str(rlog)]
    t0 = time.monotonic()
    rec = {"scenario": scenario, "impl": impl["id"], "log": f"logs/{tag}.log", "timeout_s": round(timeout_s, 1)}
    with open(logs / f"{tag}.log", "w") as logf:
        logf.write(f"$ {' '.join(argv)}\n")
        logf.flush()
        p = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, env=env, cwd=out,
                             start_new_session=True)
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
    if scenario == "D":
        rec.setdefault("figures", {})
        lines = rlog.read_text().splitlines() if rlog.exists() else []
        exit_at = lines.index("exit-begins") if "exit-begins" in lines else None
        after = lines[exit_at + 1:] if exit_at is not None else []
        fig = rec["figures"]
        fig["released_during_shutdown"] = len([x for x in after if x and x[0].isdigit()])
        if "payloads" in fig:
            fig["leaked"] = fig["payloads"] - fig.get("released_before_exit", 0) - fig["released_during_shutdown"]
        fig["exit_status"] = rc
        fig["exit_signal"] = rec["signal"]
        stats = logs / f"{tag}.stats-at-exit.json"
        if stats.exists():
            try:
                s = json.loads(stats.read_text())
                fig["stats_at_exit"] = {k: s[k] for k in ("enqueued", "cleaned", "leaked_at_shutdown",
                                                          "cleanups_after_shutdown") if k in s}
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


def our_commit() -> str:
    if os.environ.get("DC_COMMIT"):
        return os.environ["DC_COMMIT"]
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def parent(a: argparse.Namespace) -> int:
    gpu = gpu_preflight()
    impls = implementations(a.cuda_core or ["env"], a.ours)
    scenarios = [s for s in SCENARIOS if s.split("-")[0] in a.scenarios.split(",") or s in a.scenarios.split(",")]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    data = {
        "schema": 1,
        "started_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"hostname": socket.gethostname(), "platform": platform.platform(),
                    "cpu_count": os.cpu_count()},
        "gpu": gpu,
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "our_commit": our_commit(),
        "implementations": [{k: v for k, v in i.items() if k != "env"} for i in impls],
        "scenarios": [{"id": s, "title": SCENARIOS[s], "timeout_s": TIMEOUT_S[s]} for s in scenarios],
        "e_seconds": a.e_seconds,
        "results": [],
    }
    deadline = time.monotonic() + a.budget_s
    for s in scenarios:
        for impl in impls:
            left = deadline - time.monotonic()
            if left < 5:
                data["results"].append({"scenario": s, "impl": impl["id"], "status": "not run",
                                        "why": f"the run's budget of {a.budget_s} s was spent"})
                continue
            rec = run_one(impl, s, out, min(TIMEOUT_S[s], left), a.e_seconds)
            print(f"[gpu-compare] {s:8} {impl['id']:22} {rec['status']:8} {rec['seconds']:7.1f} s", flush=True)
            data["results"].append(rec)
    data["finished_utc"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
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
            s += (f"{g('released_before_last_destroy_returned')} before the last destroy returned, the last "
                  f"{g('ms_last_destroy_to_last_release')} ms after it")
        s += f"; {threads}"
        if "destructors_on_main" in fig:
            s += (f"; ours: destructor threads {g('destructor_threads')}, destructors on the main thread "
                  f"{g('destructors_on_main')}")
    elif scenario.startswith("B-"):
        s = (f"released during the {g('loop_s')} s loop {g('released_during_loop')}/{g('payloads')}, after it "
             f"{g('released_after_loop')}")
        if fig.get("released_after_loop"):
            s += f" (the last {g('ms_loop_end_to_last_release')} ms after its end)"
        s += f"; {threads}"
    elif scenario == "C":
        s = (f"ring took {g('ring_accepted')} calls; released while full {g('released_while_full')}, "
             f"2 s after it drained (no entry call) {g('released_2s_after_ring_drained_no_entry')}, after one "
             f"entry call {g('released_after_one_entry_call')}/{g('payloads')}; never {g('never_released')}")
    elif scenario == "D":
        s = (f"exit status {g('exit_status')}{' (' + g('exit_signal') + ')' if fig.get('exit_signal') else ''}; "
             f"released before exit {g('released_before_exit')}, during shutdown "
             f"{g('released_during_shutdown')}, leaked {g('leaked')} of {g('payloads')}")
        if isinstance(fig.get("stats_at_exit"), dict):
            st = fig["stats_at_exit"]
            s += "; ours at exit: " + ", ".join(f"{k.replace('_', ' ')} {_fmt(v)}" for k, v in st.items())
        return s
    elif scenario == "E":
        s = (f"{g('destructors')} destructors in {g('graphs')} graphs, {g('rounds')} rounds; lost wakeups "
             f"{g('lost_wakeups')} ({g('lost_per_million')} per million); never released {g('never_released')}")
    else:
        s = ", ".join(f"{k} {v}" for k, v in f.items())
    if "direct_drains" in fig:
        s += ("," if "; ours: " in s else "; ours:") + (
            f" pending calls {g('pending_calls')}, direct drains {g('direct_drains')}, "
            f"schedule failures {g('schedule_failures')}")
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
        i["label"] + (f" (cuda-bindings {i['cuda_bindings']}, {i['module_layout']})" if i["kind"] == "cuda-core" else "")
        for i in data["implementations"])
    return [
        f"- GPU: {gpu.get('name')} (driver API {gpu.get('driver_api_version')}; nvidia-smi: {gpu.get('nvidia_smi')})",
        f"- Machine: {data['machine']['platform']}, {data['machine']['cpu_count']} CPUs",
        f"- Python: {py['implementation']} {py['version']}",
        f"- Implementations: {impls}",
        f"- Our commit: {data['our_commit']}; run {data['started_utc']} to {data.get('finished_utc')}",
    ]


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
    ap.add_argument("--cuda-core", action="append", metavar="LABEL=PATH",
                    help="a cuda-core to compare: PATH is prepended to PYTHONPATH ('env' or empty: the "
                         "interpreter's own); repeatable; default: the interpreter's own")
    ap.add_argument("--ours", nargs="+", default=["reference", "cuda-core-1.2"], metavar="VARIANT",
                    help="DEFERRED_CLEANUP_VARIANT values to run our cuda driver in")
    ap.add_argument("--scenarios", default="A,B,C,D,E", help="comma-separated: A, B (all forms), B-pure, ..., E")
    ap.add_argument("--budget-s", type=float, default=480.0, help="wall-clock budget of the whole run (seconds)")
    ap.add_argument("--e-seconds", type=float, default=24.0, help="scenario E's production time (seconds)")
    ap.add_argument("--render", metavar="JSON",
                    help="only write the Markdown table of an existing JSON next to it (gpu-compare.md)")
    ap.add_argument("--child", nargs=3, metavar=("KIND", "SCENARIO", "RESULT"), help=argparse.SUPPRESS)
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
