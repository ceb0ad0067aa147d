#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""When to use what: the handoffs an extension author could pick, side by side.

One workload, five handoffs.  A pool of 8 native threads (no Python thread
state) completes one job per payload; each completion must call a Python
callback with its payload and release the payload (its last reference).  The
handoffs (``tools/alternatives/altpool.cpp`` says what each one does and where
its shape comes from):

* ``gil``: pybind11's ``gil_scoped_acquire`` (``PyGILState_Ensure``) on the worker;
* ``guard``: a PEP 788 interpreter guard and ``PyThreadState_Ensure`` on the
  worker (CPython 3.15 only; elsewhere the row says why it is absent);
* ``asyncio``: the worker hands the callback to ``loop.call_soon_threadsafe``;
* ``mutexq``: a ``std::mutex`` list, one ``Py_AddPendingCall`` when it goes
  non-empty, an ``atexit`` close (greenlet's shape);
* ``core``: this project, ``deferred_cleanup`` (reference variant) through
  its simulated driver, whose 8 release threads are native threads with no
  thread state, like the pool's workers.

Two measurements per handoff, each in fresh child interpreters:

* the burst: ``--burst`` payloads (default 10^5) completed at once; wall
  seconds from the start to the last release (the main thread waits in
  0.2 ms sleeps, or runs the event loop for ``asyncio``), how many were
  released on the main thread, the child's exit status;
* the exit test, ``--exit-runs`` times (default 25): the script's last line
  starts ``--exit-n`` completions (default 10^4), so they are still arriving
  while the interpreter exits; each run's exit status or signal, and the
  payloads released (the counters live in a shared file mapping, so a run
  that crashed still reports how far it got).

Usage::

    tools/alternatives.py [--only NAME,...] [--burst N] [--exit-runs N] [--exit-n N] [--reuse]
        every interpreter of the matrix (tools/matrix.py run NAME), then
        docs/_data/alternatives.json with a provenance stamp (--out to change)
    PY tools/alternatives.py measure --json PATH [--burst N ...]
        one interpreter, the one running it (needs pybind11 and, for the
        ``core`` row, deferred_cleanup installed); writes its JSON to PATH

Only the standard library is used by the first form (it runs on the
machine's python3).  The extension is built with g++ against the running
interpreter's headers and pybind11 into ``build/alternatives/<name>/``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import provenance  # noqa: E402  (tools/provenance.py: standard library only)

SRC = REPO / "tools" / "alternatives" / "altpool.cpp"
OUT = REPO / "docs" / "_data" / "alternatives.json"
HANDOFFS = ["gil", "guard", "asyncio", "mutexq", "core"]
LABELS = {
    "gil": "gil: gil_scoped_acquire (pybind11)",
    "guard": "guard: PEP 788 guard (3.15+)",
    "asyncio": "asyncio: call_soon_threadsafe",
    "mutexq": "mutexq: mutex queue (greenlet's shape)",
    "core": "core: deferred_cleanup (this library)",
}
# The interpreters measured: the matrix without its debug build (a debug
# build's timings say nothing about a release build's).
NAMES = [
    "cp310-pyenv",
    "cp311-pyenv",
    "cp312-pyenv",
    "cp313-pyenv",
    "cp313-sid",
    "cp314-sid",
    "cp315-sid",
]
#: Globs of provenance.PACKAGE_GLOBS this tool's committed stamp lacks (see GLOBS).
ALTERNATIVES_NOT_YET = (
    "src/cpython/*.cpp",
    "src/cpython/*.hpp",
    "reference/src/*.hpp",
    "reference/python/deferred_cleanup/*.py",
)
# The sources whose change makes the data stale (tools/provenance.py).
GLOBS = [
    "tools/alternatives.py",
    "tools/alternatives/*.cpp",
    # The package, less what the committed stamp predates: src/cpython/*.{cpp,hpp}
    # (the host library _native links since the one-host merge) and the rest of
    # PACKAGE_GLOBS join with the next measurement, because tests/test_alternatives.py
    # requires the committed stamp's globs to be these.
    *provenance.package_globs(without=ALTERNATIVES_NOT_YET),
    "reference/python/deferred_cleanup/__init__.py",
]
THREADS = 8
BURST_TIMEOUT_S = 120.0  # hang guard for one burst child (generous: the slowest takes seconds)
EXIT_TIMEOUT_S = 60.0  # hang guard for one exit-test child; past it the run counts as "hang"


def say(msg: str) -> None:
    print(f"[alternatives] {msg}", flush=True)


# --------------------------------------------------------------- the children
CHILD = r"""
import sys, time
sys.path.insert(0, {ext_dir!r})
import altpool
HANDOFF, N, THREADS, MODE = {handoff!r}, {n}, {threads}, {mode!r}
note = altpool.note


def callback(p):
    note(p)


payloads = [altpool.Payload() for _ in range(N)]
if HANDOFF == "core":
    import deferred_cleanup as dc
    driver = dc.SimulatedDriver()
    graph = driver.create_graph()
    for p in payloads:
        graph.attach(p, callback)
    del p  # the loop variable would keep the last payload alive
    driver.set_hold(True)
    graph.destroy()  # the destructor calls are held until release()
    payloads.clear()


def start(loop=None):
    if HANDOFF == "core":
        return driver.release(THREADS)
    return altpool.run(HANDOFF, payloads, callback, THREADS, loop)  # clears payloads


if MODE == "exit":
    if HANDOFF == "asyncio":
        import asyncio

        async def main():
            start(asyncio.get_running_loop())

        asyncio.run(main())  # the last line: the loop closes while completions arrive
    else:
        start()  # the last line: the completions arrive while the interpreter exits
else:
    import json
    counts = altpool.counts
    deadline = time.monotonic() + {timeout}
    timed_out = False
    if HANDOFF == "asyncio":
        import asyncio

        async def main():
            global timed_out
            t0 = time.perf_counter()
            start(asyncio.get_running_loop())
            while counts()["released"] < N:
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                await asyncio.sleep(0.0002)
            return time.perf_counter() - t0

        seconds = asyncio.run(main())
    else:
        t0 = time.perf_counter()
        start()
        while counts()["released"] < N:
            if time.monotonic() > deadline:
                timed_out = True
                break
            time.sleep(0.0002)
        seconds = time.perf_counter() - t0
    out = dict(counts(), seconds=seconds, timed_out=timed_out)
    if HANDOFF == "core":
        driver.wait_idle(10.0)
    print("ALTPOOL-RESULT " + json.dumps(out), flush=True)
"""


def child_script(ext_dir: Path, handoff: str, n: int, mode: str) -> str:
    """The Python source of one child run.

    :param ext_dir: where ``altpool`` was built (Path)
    :param handoff: one of :data:`HANDOFFS` (str)
    :param n: payloads (int, >= 1)
    :param mode: ``"burst"`` (prints one ``ALTPOOL-RESULT {json}`` line) or
        ``"exit"`` (the last line starts the completions) (str)
    :returns: the source (str)
    :raises: nothing
    """
    return CHILD.format(
        ext_dir=str(ext_dir),
        handoff=handoff,
        n=n,
        threads=THREADS,
        mode=mode,
        timeout=BURST_TIMEOUT_S - 10,
    )


def describe_status(rc: int | None) -> str:
    """``"rc 0"``, ``"rc 1"``, ``"SIGABRT"``, or ``"hang"`` (rc None).

    :param rc: a subprocess return code (negative: the signal), or None (killed
        by the hang guard) (int | None)
    :returns: str
    :raises: nothing
    """
    if rc is None:
        return "hang"
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"rc {rc}"


def _run_child(src: str, timeout_s: float, env: dict) -> tuple[int | None, str, str]:
    try:
        p = subprocess.run(
            [sys.executable, "-c", src],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            cwd=str(REPO),
        )
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout or ""
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr or ""
        return None, out, err


def read_counts(path: Path) -> dict | None:
    """The child's counters from its shared mapping (9 little-endian uint64,
    in ``altpool.FIELDS`` order); None when the child never mapped it.

    :param path: the file named by ALTPOOL_COUNTS (Path)
    :returns: dict[str, int] | None
    :raises: nothing
    """
    fields = [
        "submitted",
        "released",
        "released_main",
        "callbacks",
        "callbacks_main",
        "leaked",
        "guard_refused",
        "add_failed",
        "workers_done",
    ]
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    if len(raw) < 8 * len(fields):
        return None
    return {f: int.from_bytes(raw[8 * i : 8 * i + 8], "little") for i, f in enumerate(fields)}


def burst(ext_dir: Path, handoff: str, n: int) -> dict:
    """One burst in a fresh child interpreter.

    :param ext_dir: where ``altpool`` was built (Path)
    :param handoff: one of :data:`HANDOFFS` (str)
    :param n: payloads (int)
    :returns: dict: ``status`` (str, :func:`describe_status`), ``seconds``
        (float, start to last release, or None), the counters of
        :func:`read_counts`, ``timed_out`` (bool), ``stderr_tail`` (str)
    :raises: nothing (a crash or a hang is a result)
    """
    with tempfile.TemporaryDirectory() as tmp:
        counts = Path(tmp) / "counts"
        env = dict(os.environ, ALTPOOL_COUNTS=str(counts))
        rc, out, err = _run_child(child_script(ext_dir, handoff, n, "burst"), BURST_TIMEOUT_S, env)
        r: dict = {"status": describe_status(rc), "seconds": None, "timed_out": rc is None}
        for line in out.splitlines():
            if line.startswith("ALTPOOL-RESULT "):
                r.update(json.loads(line[len("ALTPOOL-RESULT ") :]))
        if "released" not in r:
            r.update(read_counts(counts) or {})
    r["stderr_tail"] = "\n".join(err.strip().splitlines()[-3:])
    return r


def exit_runs(ext_dir: Path, handoff: str, n: int, runs: int) -> dict:
    """The exit test ``runs`` times.

    :param ext_dir: where ``altpool`` was built (Path)
    :param handoff: one of :data:`HANDOFFS` (str)
    :param n: completions started by the script's last line (int)
    :param runs: child runs (int)
    :returns: dict: ``runs`` (int), ``statuses`` ({status: count}),
        ``released_min``/``released_max``/``released_main_min`` (int, over the
        runs whose counters could be read), ``leaked_max`` (int), ``n`` (int),
        ``stderr_example`` (str: the last lines of one failing run's stderr)
    :raises: nothing
    """
    statuses: dict[str, int] = {}
    rel, rel_main, leaked = [], [], []
    example = ""
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            counts = Path(tmp) / f"counts{i}"
            env = dict(os.environ, ALTPOOL_COUNTS=str(counts))
            rc, _, err = _run_child(child_script(ext_dir, handoff, n, "exit"), EXIT_TIMEOUT_S, env)
            st = describe_status(rc)
            statuses[st] = statuses.get(st, 0) + 1
            if st != "rc 0" and not example:
                example = "\n".join(err.strip().splitlines()[-3:])
            c = read_counts(counts)
            if c is not None:
                rel.append(c["released"])
                rel_main.append(c["released_main"])
                leaked.append(c["leaked"])
    return {
        "runs": runs,
        "n": n,
        "statuses": statuses,
        "released_min": min(rel) if rel else None,
        "released_max": max(rel) if rel else None,
        "released_main_min": min(rel_main) if rel_main else None,
        "leaked_max": max(leaked) if leaked else None,
        "stderr_example": example,
    }


def build_ext(dest: Path) -> Path:
    """Build ``altpool`` for the running interpreter into ``dest``.

    :param dest: a scratch directory (Path; made if missing)
    :returns: ``dest`` (Path)
    :raises subprocess.CalledProcessError: g++ failed (its output is printed)
    :raises ImportError: pybind11 is not installed in this interpreter
    """
    import pybind11  # noqa: PLC0415  (from the environment, as the task's extension would)

    dest.mkdir(parents=True, exist_ok=True)
    target = dest / ("altpool" + sysconfig.get_config_var("EXT_SUFFIX"))
    cmd = [
        "g++",
        "-O2",
        "-std=c++17",
        "-shared",
        "-fPIC",
        "-fvisibility=hidden",
        "-pthread",
        f"-I{pybind11.get_include()}",
        f"-I{sysconfig.get_paths()['include']}",
        str(SRC),
        "-o",
        str(target),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stdout + p.stderr, file=sys.stderr)
        p.check_returncode()
    return dest


def measure(burst_n: int, runs: int, exit_n: int, name: str) -> dict:
    """Every handoff on the running interpreter.

    :param burst_n: payloads of the burst (int)
    :param runs: exit-test runs per handoff (int)
    :param exit_n: completions of each exit run (int)
    :param name: the interpreter's matrix name (str; names the build directory)
    :returns: dict: ``name``, ``python`` (version), ``handoffs``: {handoff:
        {``burst``: :func:`burst`, ``exit``: :func:`exit_runs`} or
        {``absent``: why}}
    :raises subprocess.CalledProcessError: the extension did not build
    """
    ext_dir = build_ext(REPO / "build" / "alternatives" / name)
    out: dict = {"name": name, "python": platform.python_version(), "handoffs": {}}
    for h in HANDOFFS:
        if h == "guard" and sys.version_info < (3, 15):
            out["handoffs"][h] = {"absent": "PEP 788 guards are new in CPython 3.15"}
            continue
        if h == "core":
            try:
                import deferred_cleanup as dc  # noqa: PLC0415

                out["core_variant"] = dc.variant()
            except ImportError as e:
                out["handoffs"][h] = {"absent": f"deferred_cleanup is not installed: {e}"}
                continue
        t0 = time.monotonic()
        b = burst(ext_dir, h, burst_n)
        x = exit_runs(ext_dir, h, exit_n, runs)
        out["handoffs"][h] = {"burst": b, "exit": x}
        say(
            f"{name} {h}: burst {b['status']} {b.get('seconds')} s, main "
            f"{b.get('released_main')}/{burst_n}; exit {x['statuses']} released "
            f"{x['released_min']}..{x['released_max']} ({time.monotonic() - t0:.0f} s)"
        )
    return out


# ------------------------------------------------------------- the table
def _pct(k: int | None, n: int) -> str:
    return "?" if k is None else f"{k}/{n}"


def burst_cell(r: dict, n: int) -> str:
    """One burst as a table cell: seconds, released on the main thread, status."""
    if "absent" in r:
        return "n/a"
    b = r["burst"]
    secs = "-" if b.get("seconds") is None or b.get("timed_out") else f"{b['seconds']:.2f} s"
    cell = f"{secs}; main {_pct(b.get('released_main'), n)}"
    if b.get("released", n) != n:
        cell += f"; released {_pct(b.get('released'), n)}"
    if b["status"] != "rc 0":
        cell += f"; {b['status']}"
    return cell


def exit_cell(r: dict) -> str:
    """One exit test as a table cell: statuses over the runs, payloads released."""
    if "absent" in r:
        return "n/a"
    x = r["exit"]
    st = ", ".join(f"{k} ×{v}" for k, v in sorted(x["statuses"].items(), key=lambda kv: -kv[1]))
    lo, hi = x["released_min"], x["released_max"]
    rel = "?" if lo is None else (f"{lo}" if lo == hi else f"{lo}–{hi}")
    cell = f"{st}; released {rel}/{x['n']}"
    if x.get("leaked_max"):
        cell += f"; leaked up to {x['leaked_max']}"
    return cell


def table_rows(data: dict, which: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the ``"burst"`` or ``"exit"`` table: one row per
    handoff, one column per interpreter; an interpreter missing from the
    data gets a column saying so.

    :param data: the JSON written by :func:`main` (dict)
    :param which: ``"burst"`` or ``"exit"`` (str)
    :returns: (header, rows) of str
    :raises ValueError: ``which`` is neither
    """
    if which not in ("burst", "exit"):
        raise ValueError(which)
    interps = data["interpreters"]
    head = ["handoff"] + [f"{i['name']} {i.get('python', '')}".strip() for i in interps]
    rows = []
    for h in HANDOFFS:
        row = [LABELS[h]]
        for i in interps:
            r = i.get("handoffs", {}).get(h)
            if r is None:
                row.append(i.get("missing", "not measured"))
            elif which == "burst":
                row.append(burst_cell(r, data["burst_n"]))
            else:
                row.append(exit_cell(r))
        rows.append(row)
    return head, rows


def absent_reasons(data: dict) -> list[str]:
    """One line per distinct reason a cell is n/a or an interpreter missing."""
    seen = []
    for i in data["interpreters"]:
        if "missing" in i:
            seen.append(f"{i['name']}: {i['missing']}")
        for h, r in i.get("handoffs", {}).items():
            line = f"{h}: {r['absent']}" if "absent" in r else None
            if line and line not in seen:
                seen.append(line)
    return seen


def crash_lines(data: dict) -> list[str]:
    """What a failing child said last: one line per handoff and interpreter
    whose burst or exit runs did not all end with ``rc 0``."""
    out = []
    for i in data["interpreters"]:
        for h in HANDOFFS:
            r = i.get("handoffs", {}).get(h, {})
            if "absent" in r or not r:
                continue
            b, x = r["burst"], r["exit"]
            bad = [k for k in x["statuses"] if k != "rc 0"]
            if b["status"] != "rc 0":
                last = (b.get("stderr_tail") or "").strip().splitlines()[-1:] or ["no output"]
                out.append(f"{h} on {i['name']}, burst, {b['status']}: {last[0]}")
            if bad:
                last = (x.get("stderr_example") or "").strip().splitlines()[-1:] or ["no output"]
                out.append(f"{h} on {i['name']}, exit test, {', '.join(bad)}: {last[0]}")
    return out


# ------------------------------------------------------------------ main
def _matrix_measure(name: str, a) -> dict:
    res = REPO / "build" / "alternatives" / name / "result.json"
    if a.reuse and res.exists():
        say(f"{name}: reusing {res.relative_to(REPO)} (--reuse)")
        return json.loads(res.read_text())
    res.unlink(missing_ok=True)
    cmd = (
        f"$PY tools/alternatives.py measure --name {name} --json {res} --burst {a.burst} "
        f"--exit-runs {a.exit_runs} --exit-n {a.exit_n}"
    )
    sys.path.insert(0, str(REPO / "tools"))
    import matrix  # noqa: PLC0415  (tools/matrix.py: imported here, as the docs import this file)

    log = REPO / "build" / "alternatives" / f"{name}.log"
    rc = matrix.run_in_env(name, cmd, log)
    if rc == 0 and res.exists():
        return json.loads(res.read_text())
    tail = log.read_text(errors="replace").strip().splitlines()[-2:]
    return {"name": name, "missing": f"not measured (exit {rc}): " + " / ".join(tail)}


def main(argv: list[str] | None = None) -> int:
    """Command line; see the module docstring.

    :param argv: arguments (list[str] | None: sys.argv[1:])
    :returns: 0, or 1 when no interpreter could be measured
    :raises SystemExit: bad arguments
    """
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("cmd", nargs="?", default="all", choices=["all", "measure"])
    ap.add_argument("--only", help="comma-separated matrix names (default: NAMES)")
    ap.add_argument("--burst", type=int, default=100_000, help="payloads of the burst (int)")
    ap.add_argument("--exit-runs", type=int, default=25, help="exit-test runs per handoff")
    ap.add_argument("--exit-n", type=int, default=10_000, help="completions per exit run")
    ap.add_argument("--json", type=Path, help="measure: where to write this interpreter's JSON")
    ap.add_argument("--name", default=os.environ.get("DC_INTERPRETER_NAME", "local"))
    ap.add_argument("--out", type=Path, default=OUT, help="all: the data file (default: docs)")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="all: take an interpreter's build/alternatives/NAME/result.json when it exists "
        "(a run that was stopped part-way; the measuring code must not have changed since)",
    )
    a = ap.parse_args(argv)
    if a.cmd == "measure":
        r = measure(a.burst, a.exit_runs, a.exit_n, a.name)
        text = json.dumps(r, indent=2) + "\n"
        if a.json:
            a.json.parent.mkdir(parents=True, exist_ok=True)
            a.json.write_text(text)
        else:
            print(text)
        return 0
    names = [n for n in a.only.split(",") if n] if a.only else NAMES
    # The data lists the interpreters in the matrix's order, whatever order they ran in.
    order = {n: i for i, n in enumerate(NAMES)}
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    interps = []
    for name in names:
        t0 = time.monotonic()
        say(f"{name}: measuring (log: build/alternatives/{name}.log)")
        interps.append(_matrix_measure(name, a))
        say(f"{name}: done in {time.monotonic() - t0:.0f} s")
    data = {
        "burst_n": a.burst,
        "exit_runs": a.exit_runs,
        "exit_n": a.exit_n,
        "threads": THREADS,
        "handoffs": {h: LABELS[h] for h in HANDOFFS},
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
        "started_utc": started,
        "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "interpreters": sorted(interps, key=lambda i: order.get(i["name"], len(order))),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(data, indent=2) + "\n")
    provenance.write_stamp(a.out, provenance.stamp(GLOBS))
    for which in ("burst", "exit"):
        head, rows = table_rows(data, which)
        print(f"\n{which}:")
        print(" | ".join(head))
        for r in rows:
            print(" | ".join(r))
    return 0 if any("handoffs" in i for i in interps) else 1


if __name__ == "__main__":
    sys.exit(main())
