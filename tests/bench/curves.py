# SPDX-License-Identifier: Apache-2.0
"""Cost as the work grows: latency, pending calls, main-thread CPU and memory
per burst size, for each variant of the installed package and for a mutex
queue (greenlet's shape), each in a process of its own.

What is measured, per burst of ``n`` payloads released from ``min(8, n)``
native threads that have no thread state (the simulated driver's release
threads for the package, altpool's pool workers for the mutex queue):

* **latency** (*latency run*): the main thread waits in a ``time.sleep(0)``
  loop (it gives up the GIL and takes it back on every step, so on CPython
  3.10-3.12 it sees a pending call at once, gh-95820; it calls no entry point
  of the package).  Each cleanup appends ``time.monotonic_ns()`` on the main
  thread.  A payload's latency is its cleanup's stamp minus the burst's
  release: for the package, the earlier of ``SimulatedDriver.last_release_ns``
  (the steady clock, the same clock as ``time.monotonic_ns`` on Linux, read
  by the first release thread just before its first destructor call) and the
  main thread's clock when ``release()`` returns (and no later than the
  first cleanup); for the mutex queue,
  ``time.monotonic_ns()`` read on the main thread when ``altpool.run``
  returns (its workers have started by then, so this is the later of the two
  stamps and favours the mutex queue).  There is no per-payload stamp inside
  the destructor callback: the latency of a payload is from the burst's
  release, so in a large burst it contains the time the driver threads take
  to reach that payload.  Median, 99th percentile and maximum of the
  latencies of every payload of every repetition.
* **pending calls per burst** (latency run): the package's
  ``counters()["pending_calls"]`` after minus before; the mutex queue does not
  count its calls (``None``).
* **main-thread CPU per released payload** (*CPU run*): the main thread
  blocks on a lock, GIL released, until a helper thread has seen every
  destructor call (worker) return, so every payload is queued before the
  drain starts; then it runs the drain (the ``sleep(0)`` loop lets the
  pending call run).  ``time.thread_time()`` of the main thread from the
  release call's return to the last cleanup, divided by ``n``; the median
  over the repetitions (it includes the few microseconds the main thread
  spends being woken, which dominate a burst of 1).  The wall time from the
  helper seeing every payload queued to the last cleanup, divided by ``n``,
  is the drain time per payload (it includes waking the main thread).
* **memory per queued payload** (CPU run of the largest burst): the growth
  of the process's resident set (``/proc/self/statm``) from before the
  payloads are attached (the payload objects already exist) to the moment
  every payload is queued and none is drained, divided by ``n``: the
  package's payload record (which embeds the queue item) plus what the
  simulated driver allocated per user object; for the mutex queue, the job
  in altpool's batch and in its ``std::deque``.

A burst whose payloads stop arriving for ``STALL_S`` seconds is recorded as a
stall (a lost wakeup) and rescued with ``deferred_cleanup.drain_now()``.

Usage::

    python tests/bench/curves.py run --variant V [--smoke] [--altpool DIR]   # JSON on stdout
    python3 tests/bench/curves.py all --out PATH [--smoke] [--altpool DIR] \
        [--python PY] [--stamp FILE]

``run`` measures one variant in this process (``reference``, ``seed``,
``cuda-core-1.2``: the installed ``deferred_cleanup`` with
``DEFERRED_CLEANUP_VARIANT`` set to it; ``mutexq``: the ``altpool``
extension of tools/alternatives built into DIR).  ``all`` runs ``run`` for
each in a fresh ``PY`` process (default: this interpreter) and writes one
JSON with the machine, the sizes and a provenance stamp (``--stamp``: a
stamp made where the sources were, tools/provenance.py; else the tree here).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

THREADS = 8  # native threads releasing a burst (at most one per payload)
SIZES = [1, 100, 10_000, 1_000_000]
SMOKE_SIZES = [1, 100, 1000]
# Repetitions per size: (latency runs, CPU runs).  The latency samples of a
# size are every payload of every repetition.
REPS = {1: (200, 50), 100: (50, 20), 10_000: (5, 3), 1_000_000: (1, 1)}
SMOKE_REPS = {1: (20, 5), 100: (5, 3), 1000: (2, 2)}
VARIANTS = ["reference", "seed", "cuda-core-1.2", "mutexq"]
STALL_S = 10.0  # no payload released for this long: a stall, rescued by drain_now()
TIMEOUT_S = 300.0  # hang guard of one burst
REPO = Path(__file__).resolve().parents[2]
# tools/ of the repository; in the GPU bundle (tools/gpu_bundle.sh) this file is
# copied beside bench.py and provenance.py, and its own folder is sys.path[0].
sys.path.insert(0, str(REPO / "tools"))
import bench  # noqa: E402  (tools/bench.py)
import provenance  # noqa: E402  (tools/provenance.py)

# What a stamp covers: the package, this runner and e2e.py (its held graph).
GLOBS = [
    *provenance.PACKAGE_GLOBS,
    "tests/bench/curves.py",
    "tests/bench/e2e.py",
    "tools/alternatives/altpool.cpp",
]


def _rss_bytes() -> int:
    """Resident set size of this process, bytes (Linux /proc)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _percentile(sorted_values: list[int], q: float) -> int:
    """The q-quantile (0..1) by the nearest-rank method."""
    k = max(0, min(len(sorted_values) - 1, int(q * len(sorted_values) + 0.999999) - 1))
    return sorted_values[k]


class _Package:
    """The installed deferred_cleanup, one simulated driver for the process."""

    def __init__(self) -> None:
        import deferred_cleanup as dc  # noqa: PLC0415  (the variant is fixed at import)

        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import e2e  # noqa: PLC0415  (tests/bench/e2e.py: the held graph)

        self.dc = dc
        self.e2e = e2e
        self.name = dc.variant()
        self.driver = dc.SimulatedDriver()

    def make_payloads(self, n: int) -> list:
        return [object() for _ in range(n)]

    def prepare(self, payloads: list, finalizer) -> dict:
        n = self.e2e.hold(self.driver, payloads, finalizer)  # empties payloads
        return {"n": n, "before": self.dc.counters()}

    def start(self, h: dict) -> None:
        """Release the held calls from min(THREADS, n) native threads; returns at once."""
        self.driver.release(min(THREADS, h["n"]))
        h["t_main"] = time.monotonic_ns()

    def release_ns(self, h: dict) -> int:
        """The burst's release (ns, monotonic): the earliest of the first release
        thread's stamp (stored before its first destructor call, so read once a
        cleanup ran) and the main thread's clock when release() returned (the
        first thread may be scheduled after the others).  Every destructor call
        starts after the gate inside release() opened, which no stamp precedes
        except, where the pending call ran before that clock read (3.13+), the
        cleanups' own: latency_run takes the minimum with those too."""
        return min(self.driver.last_release_ns, h["t_main"])

    def wait_pushed(self, h: dict) -> None:
        if not self.driver.wait_idle(TIMEOUT_S):
            raise TimeoutError("the driver's destructor calls did not return")

    def rescue(self) -> None:
        self.dc.drain_now()

    def finish(self, h: dict) -> dict:
        self.wait_pushed(h)
        after = self.dc.counters()
        d = {
            k: after[k] - h["before"][k] for k in ("cleaned", "pending_calls", "cleanups_off_main")
        }
        if d["cleaned"] != h["n"] or d["cleanups_off_main"] != 0:
            raise AssertionError(f"{self.name}: burst of {h['n']}: {d}")
        return d


class _MutexQueue:
    """altpool's mutexq handoff (tools/alternatives/altpool.cpp): greenlet's shape."""

    def __init__(self, ext_dir: str) -> None:
        sys.path.insert(0, ext_dir)
        import altpool  # noqa: PLC0415  (built by tools/alternatives.py build_ext)

        self.ap = altpool
        self.name = "mutexq"

    def make_payloads(self, n: int) -> list:
        return [self.ap.Payload() for _ in range(n)]

    def prepare(self, payloads: list, finalizer) -> dict:
        return {"n": len(payloads), "payloads": payloads, "fin": finalizer}

    def start(self, h: dict) -> None:
        h["before"] = self.ap.counts()
        self.ap.run("mutexq", h["payloads"], h["fin"], min(THREADS, h["n"]))  # empties the list
        h["t0"] = time.monotonic_ns()  # the workers have started: a late stamp

    def release_ns(self, h: dict) -> int:
        return h["t0"]

    def wait_pushed(self, h: dict) -> None:
        target = h["before"]["workers_done"] + min(THREADS, h["n"])
        deadline = time.monotonic() + TIMEOUT_S
        while self.ap.counts()["workers_done"] < target:
            if time.monotonic() > deadline:
                raise TimeoutError("the pool's workers did not finish")
            time.sleep(0.0005)

    def rescue(self) -> None:
        self.ap.mutexq_close()

    def finish(self, h: dict) -> dict:
        self.wait_pushed(h)
        c = self.ap.counts()
        d = {k: c[k] - h["before"][k] for k in ("released", "released_main", "add_failed")}
        if d["released"] != h["n"] or d["released_main"] != h["n"] or d["add_failed"]:
            raise AssertionError(f"mutexq: burst of {h['n']}: {d}")
        return {"cleaned": d["released"], "pending_calls": None, "cleanups_off_main": 0}


def _wait_for(stamps: list, n: int, src) -> int:
    """Spin in time.sleep(0) until n cleanups stamped; rescue a stall.  Returns stalls."""
    stalls = 0
    last, seen = time.monotonic(), len(stamps)
    deadline = last + TIMEOUT_S
    sleep = time.sleep
    while len(stamps) < n:
        sleep(0)
        if len(stamps) != seen:
            seen, last = len(stamps), time.monotonic()
        elif time.monotonic() - last > STALL_S:
            stalls += 1
            src.rescue()
            last = time.monotonic()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(stamps)} of {n} payloads released")
    return stalls


def latency_run(src, n: int) -> dict:
    """One burst of n; the latencies (ns) and the pending calls it took."""
    stamps: list[int] = []
    append, clock = stamps.append, time.monotonic_ns

    def finalizer(_obj) -> None:
        append(clock())

    h = src.prepare(src.make_payloads(n), finalizer)
    src.start(h)
    stalls = _wait_for(stamps, n, src)
    d = src.finish(h)
    t0 = min(src.release_ns(h), min(stamps))
    return {"lat": [s - t0 for s in stamps], "pending_calls": d["pending_calls"], "stalls": stalls}


def cpu_run(src, n: int, memory: bool = False) -> dict:
    """One burst of n, every payload queued before the drain; CPU and wall per payload."""
    stamps: list[int] = []
    append, clock = stamps.append, time.monotonic_ns

    def finalizer(_obj) -> None:
        append(clock())

    payloads = src.make_payloads(n)
    rss0 = _rss_bytes() if memory else 0
    h = src.prepare(payloads, finalizer)
    go, pushed = threading.Lock(), threading.Lock()
    go.acquire()
    pushed.acquire()
    err: list[BaseException] = []
    queued: dict = {}

    def helper() -> None:
        # The main thread is blocked: nothing is drained until pushed is
        # released, and once it is, the pending call runs as soon as the main
        # thread has the GIL back (before any Python line of its own), so the
        # all-queued moment is read here.
        go.acquire()
        try:
            src.wait_pushed(h)
            queued["rss"] = _rss_bytes() if memory else 0
            queued["ns"] = time.monotonic_ns()
        except BaseException as e:  # noqa: BLE001  (reported by the main thread)
            err.append(e)
        pushed.release()

    t = threading.Thread(target=helper, daemon=True)
    t.start()  # before the timed part: starting a thread costs the main thread tens of us
    src.start(h)
    c0 = time.thread_time()
    early = len(stamps)
    go.release()
    pushed.acquire()  # GIL released: pending calls wait for the main thread
    if err:
        raise err[0]
    stalls = _wait_for(stamps, n, src)
    c1 = time.thread_time()
    src.finish(h)
    t.join()
    out = {
        "cpu_ns": (c1 - c0) * 1e9 / n,
        "wall_ns": (max(stamps) - queued["ns"]) / n,
        "early": early,
        "stalls": stalls,
    }
    if memory:
        out["rss_bytes_per_payload"] = (queued["rss"] - rss0) / n
    return out


def measure(src, sizes: list[int], reps: dict) -> dict:
    """Every size, latency runs then CPU runs; the summary per size."""
    rows = {}
    for n in sizes:
        n_lat, n_cpu = reps[n]
        lat: list[int] = []
        calls: list[int] = []
        stalls = 0
        for _ in range(n_lat):
            r = latency_run(src, n)
            lat += r["lat"]
            stalls += r["stalls"]
            if r["pending_calls"] is not None:
                calls.append(r["pending_calls"])
        lat.sort()
        cpu = [cpu_run(src, n, memory=(n == sizes[-1] and k == 0)) for k in range(n_cpu)]
        row = {
            "payloads": n,
            "threads": min(THREADS, n),
            "latency": {
                "bursts": n_lat,
                "samples": len(lat),
                "median_us": statistics.median(lat) / 1e3,
                "p99_us": _percentile(lat, 0.99) / 1e3,
                "max_us": lat[-1] / 1e3,
                "min_us": lat[0] / 1e3,
            },
            "pending_calls": (
                {"mean": statistics.fmean(calls), "min": min(calls), "max": max(calls)}
                if calls
                else None
            ),
            "cpu": {
                "bursts": n_cpu,
                "ns_per_payload": statistics.median(c["cpu_ns"] for c in cpu),
                "drain_wall_ns_per_payload": statistics.median(c["wall_ns"] for c in cpu),
                "drained_before_wait": sum(c["early"] for c in cpu),
            },
            "stalls": stalls + sum(c["stalls"] for c in cpu),
        }
        mem = [c["rss_bytes_per_payload"] for c in cpu if "rss_bytes_per_payload" in c]
        if mem:
            row["rss_bytes_per_payload"] = mem[0]
        rows[str(n)] = row
    return rows


def run_one(variant: str, smoke: bool, altpool: str | None) -> dict:
    """Measure one variant in this process.

    Args:
        variant (str): one of VARIANTS; for the package ones it must equal
            the DEFERRED_CLEANUP_VARIANT this process imported with.
        smoke (bool): the small sizes (seconds in all).
        altpool (str | None): directory holding the built altpool extension
            (needed for ``mutexq``).

    Returns:
        dict: ``variant``, ``python`` (version), ``sizes``, ``rows`` (per size
        as a string: ``latency`` in microseconds, ``pending_calls``, ``cpu``
        in ns per payload, ``stalls``, and at the largest size
        ``rss_bytes_per_payload``).

    Raises:
        ValueError: the package's variant is not ``variant``, or mutexq
            without ``altpool``.
        AssertionError: a burst lost a payload or ran a cleanup off the main
            thread.
        TimeoutError: a burst hung (``TIMEOUT_S``).
    """
    if variant == "mutexq":
        if not altpool:
            raise ValueError("mutexq needs --altpool DIR (tools/alternatives.py build_ext)")
        src = _MutexQueue(altpool)
    else:
        src = _Package()
        if src.name != variant:
            raise ValueError(f"the package runs {src.name!r}, not {variant!r}")
    sizes = SMOKE_SIZES if smoke else SIZES
    t0 = time.monotonic()
    rows = measure(src, sizes, SMOKE_REPS if smoke else REPS)
    return {
        "variant": variant,
        "python": sys.version.split()[0],
        "sizes": sizes,
        "rows": rows,
        "seconds": time.monotonic() - t0,
    }


def _machine() -> dict:
    return {
        "cpu": bench.cpu_model(),  # tools/bench.py's, as the bench pages have it
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def run_all(
    out: Path, smoke: bool, altpool: str | None, python: str, stamp: str | None, note: str
) -> dict:
    """Every variant, each in a fresh process; write and return the JSON."""
    data: dict = {
        "what": "curves",
        "smoke": smoke,
        "machine": dict(_machine(), note=note),
        "threads": THREADS,
        "stall_s": STALL_S,
        "sizes": SMOKE_SIZES if smoke else SIZES,
        "variants": {},
    }
    for v in VARIANTS:
        if v == "mutexq" and not altpool:
            data["variants"][v] = {"missing": "altpool not built (no --altpool)"}
            continue
        cmd = [python, str(Path(__file__).resolve()), "run", "--variant", v]
        cmd += ["--smoke"] if smoke else []
        cmd += ["--altpool", altpool] if altpool else []
        env = dict(os.environ)
        if v != "mutexq":
            env["DEFERRED_CLEANUP_VARIANT"] = v
        print(f"[curves] {v} ...", file=sys.stderr, flush=True)
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S * 4)
        if p.returncode != 0:
            data["variants"][v] = {"missing": f"exit {p.returncode}: {p.stderr.strip()[-400:]}"}
            print(f"[curves] {v}: failed\n{p.stderr[-2000:]}", file=sys.stderr, flush=True)
            continue
        data["variants"][v] = json.loads(p.stdout)
        print(f"[curves] {v}: {data['variants'][v]['seconds']:.1f} s", file=sys.stderr, flush=True)
    if stamp:
        data["provenance"] = json.loads(Path(stamp).read_text())
    else:
        data["provenance"] = provenance.stamp(GLOBS)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    return data


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--variant", required=True, choices=VARIANTS)
    r.add_argument("--smoke", action="store_true")
    r.add_argument("--altpool")
    a = sub.add_parser("all")
    a.add_argument("--out", required=True, type=Path)
    a.add_argument("--smoke", action="store_true")
    a.add_argument("--altpool")
    a.add_argument("--python", default=sys.executable)
    a.add_argument("--stamp")
    a.add_argument("--note", default="")
    args = ap.parse_args(argv)
    if args.cmd == "run":
        print(json.dumps(run_one(args.variant, args.smoke, args.altpool)))
    else:
        run_all(args.out, args.smoke, args.altpool, args.python, args.stamp, args.note)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
