#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Py_AddPendingCall's own cost, per interpreter (issue "Performance", item 4).

What it measures: the producer's time in one ``Py_AddPendingCall`` made from
a foreign thread (a pthread with no thread state, as a CUDA destructor thread
is), while the main thread consumes the calls with ``Py_MakePendingCalls``:
uncontended (one producer, the ring empty of our calls at each add) and with 8
producers racing (all 8 add at once, released by a barrier).  The method and
its sources are in tests/bench/pending_cost.c.

Usage::

    tools/bench_pending.py [--only NAME,...] [--rounds N] [--out FILE]
        every interpreter of tools/matrix.py (or the names given): each runs
        ``--one`` through ``tools/matrix.py run NAME``; the results are merged
        into FILE (default build/bench/pending.json) with a provenance stamp
        (tools/provenance.py) of this tool and the C source.
    tools/bench_pending.py --one --json FILE [--so PATH] [--rounds N]
        this interpreter only: builds tests/bench/pending_cost.c against its
        headers (or loads the module PATH built elsewhere, as on the GPU host)
        and writes FILE.  With --stamp STAMP.json the file carries that stamp
        (made where the module was built: tools/gpu_bundle.sh).
    tools/bench_pending.py --build DIR
        only build the module for this interpreter into DIR and print its path
        (tools/gpu_bundle.sh, for the GPU host's CPython 3.12).

Only the standard library.  Needs a C compiler (``cc``, or sysconfig's CC)
and the interpreter's headers where the module is built.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import os
import platform
import shlex
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "tests" / "bench" / "pending_cost.c"
OUT = REPO / "build" / "bench"
SOURCE_GLOBS = ["tests/bench/pending_cost.c", "tools/bench_pending.py"]
DEFAULT_ROUNDS = 20000  # per mode; 8 threads make 8 calls per round
RACING = 8
BATCH = 16  # calls per timed window in the batched uncontended run (the clock's resolution)


def say(msg: str) -> None:
    print(f"[bench-pending] {msg}", flush=True)


def build_module(dest: Path) -> Path:
    """Compile pending_cost.c for this interpreter.

    Args:
        dest: directory for the shared object (Path).
    Returns:
        Path of ``_dc_pending_cost<EXT_SUFFIX>``.
    Raises:
        subprocess.CalledProcessError: the compiler failed.
    """
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")[:1] or ["cc"]
    if os.environ.get("CC"):
        cc = shlex.split(os.environ["CC"])
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    so = dest / f"_dc_pending_cost{suffix}"
    inc = sysconfig.get_paths()["include"]
    subprocess.run(
        [*cc, "-O2", "-Wall", "-Wextra", "-shared", "-fPIC", f"-I{inc}", "-o", str(so),
         str(SOURCE), "-lpthread"],
        check=True,
    )  # fmt: skip
    return so


def load(so: Path):
    """Import the module from its shared object (Path); returns the module."""
    loader = importlib.machinery.ExtensionFileLoader("_dc_pending_cost", str(so))
    spec = importlib.util.spec_from_file_location("_dc_pending_cost", str(so), loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def run_one(so: Path | None, rounds: int) -> dict:
    """Measure on this interpreter.

    Args:
        so: a prebuilt module, or None to build one in a scratch directory.
        rounds: rounds per mode (int); the 8-thread mode makes 8 calls each,
            the batched one 16.
    Returns:
        dict: interpreter (version, debug, gil_disabled, executable), machine
        (cpus, load average before), uncontended, uncontended_batch16 (16
        back-to-back calls per timed window) and racing8 (measure()'s dicts:
        ns per call, timer overhead subtracted).
    Raises:
        subprocess.CalledProcessError, ImportError, RuntimeError.
    """
    with tempfile.TemporaryDirectory(prefix="dc-pending-") as tmp:
        mod = load(so if so is not None else build_module(Path(tmp)))
        load_before = os.getloadavg()
        # A short warm-up (thread start, page faults, the first calls).
        mod.measure(1, min(rounds, 500))
        unc = mod.measure(1, rounds)
        unc_batch = mod.measure(1, rounds, BATCH)
        racing = mod.measure(RACING, rounds)
    return {
        "interpreter": {
            "version": platform.python_version(),
            "debug": hasattr(sys, "gettotalrefcount"),
            "gil_disabled": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
            "executable": sys.executable,
            "name": os.environ.get("DC_INTERPRETER_NAME", ""),
        },
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "platform": platform.platform(),
        },
        "rounds": rounds,
        "uncontended": unc,
        f"uncontended_batch{BATCH}": unc_batch,
        f"racing{RACING}": racing,
    }


def stamp() -> dict:
    sys.path.insert(0, str(REPO / "tools"))
    import provenance as prov  # noqa: PLC0415  (tools/provenance.py)

    return prov.stamp(SOURCE_GLOBS)


def matrix_names() -> list[str]:
    sys.path.insert(0, str(REPO / "tools"))
    import matrix  # noqa: PLC0415  (tools/matrix.py: the interpreters of the matrix)

    return [it.name for it in matrix.MATRIX]


def run_matrix(names: list[str], rounds: int, out: Path) -> int:
    """Run --one on each interpreter through tools/matrix.py and merge.

    Args:
        names: matrix names (list of str).
        rounds: rounds per mode (int).
        out: the merged JSON file (Path).
    Returns:
        0, or 1 when an interpreter gave no result (its error is recorded).
    """
    per = OUT / "pending"
    per.mkdir(parents=True, exist_ok=True)
    results, bad = {}, 0
    for name in names:
        dst = per / f"{name}.json"
        dst.unlink(missing_ok=True)
        say(f"{name}: {rounds} rounds, 1 and {RACING} producers")
        t0 = time.monotonic()
        script = (
            f'"$PY" tools/bench_pending.py --one --rounds {rounds} --json '
            f"{shlex.quote(str(dst.relative_to(REPO)))}"
        )
        rc = subprocess.run(
            [sys.executable, str(REPO / "tools" / "matrix.py"), "run", name, "--",
             "bash", "-c", script],
            cwd=REPO,
        ).returncode  # fmt: skip
        if rc == 0 and dst.exists():
            results[name] = json.loads(dst.read_text())
            u, r = results[name]["uncontended"], results[name][f"racing{RACING}"]
            say(
                f"{name}: uncontended median {u['median_ns']} ns (p99 {u['p99_ns']}), "
                f"{RACING} racing median {r['median_ns']} ns (p99 {r['p99_ns']}), "
                f"{time.monotonic() - t0:.0f} s"
            )
        else:
            results[name] = {"error": f"exit {rc}"}
            bad = 1
    data = {"what": __doc__.split("\n\n")[1], "results": results, "provenance": stamp()}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    say(f"wrote {out}")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--one", action="store_true", help="this interpreter only")
    ap.add_argument("--json", type=Path, help="--one: the result file")
    ap.add_argument("--so", type=Path, help="--one: a module built elsewhere")
    ap.add_argument("--stamp", type=Path, help="--one: a provenance stamp to embed")
    ap.add_argument("--build", type=Path, help="only build the module into this directory")
    ap.add_argument("--only", help="comma-separated matrix names")
    ap.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    ap.add_argument("--out", type=Path, default=OUT / "pending.json")
    a = ap.parse_args(argv)
    if a.build is not None:
        a.build.mkdir(parents=True, exist_ok=True)
        print(build_module(a.build))
        return 0
    if a.one:
        if a.json is None:
            ap.error("--one needs --json")
        data = run_one(a.so, a.rounds)
        if a.stamp is not None:
            data["provenance"] = json.loads(a.stamp.read_text())
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(data, indent=1) + "\n")
        return 0
    names = [n for n in a.only.split(",") if n] if a.only else matrix_names()
    return run_matrix(names, a.rounds, a.out)


if __name__ == "__main__":
    sys.exit(main())
