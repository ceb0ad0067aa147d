#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Does a fork() that cuts Py_AddPendingCall break the child's pending calls,
and how often does a fork land there: the widened-window measurement.

Builds ``notes/cpython/fork_cut_repro.c`` (the standalone reproducer)
against the interpreter this script runs under and runs its three modes:

* ``step``: the adding thread is stopped after exactly N instructions of one
  add (x86 trap flag), for every N, and the main thread forks at each stop:
  which instruction boundaries leave a child whose own pending calls are
  accepted and never run (``fatal``: symbol and offset of each);
* ``signal``: a SIGUSR1 stops a thread that adds in a tight loop wherever it
  happens to be, and the main thread forks (at most ``--forks`` forks or
  ``--seconds``): how many stops fell on a fatal boundary of the step mode,
  and how many children lost calls (the rate when nothing aims the fork);
* ``emulate`` (3.13 and later): the ring is put into the half-added state
  by hand and the process forks (what a cut does, not how often).

Writes one JSON object, stamped with tools/provenance.py::

    {"python", "executable", "debug", "gil_disabled",
     "step": {..., "fatal": [[symbol, offset], ...]},
     "signal": {"forks", "stops_in_add", "stops_on_fatal", "children_lost_any", ...},
     "emulate": {...} or null}

Usage (standard library only; needs cc; Linux x86-64 for the step mode):
    /path/to/python3.13 tools/fork_cut_window.py --out F.json
    tools/sid-root.sh run /usr/bin/python3.15 tools/fork_cut_window.py --out F.json
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "notes" / "cpython" / "fork_cut_repro.c"
GLOBS = ["notes/cpython/fork_cut_repro.c", "tools/fork_cut_window.py"]


def build(out: Path, emulate: bool) -> Path:
    """Compile the reproducer against the running interpreter.

    :param out: directory for the binary (Path).
    :param emulate: build the half-added-state emulation (bool; 3.13+).
    :returns: the binary's path (Path).
    :raises subprocess.CalledProcessError: the compiler failed.
    """
    cv = sysconfig.get_config_var
    inc = sysconfig.get_path("include")
    libdir = cv("LIBDIR")
    ver = cv("LDVERSION") or cv("VERSION")
    exe = out / ("emulate" if emulate else "repro")
    cmd = ["cc", "-O2", "-pthread", str(SOURCE), f"-I{inc}", f"-L{libdir}", f"-lpython{ver}"]
    cmd += shlex.split(cv("LIBS") or "") + shlex.split(cv("SYSLIBS") or "")
    cmd += ["-ldl", "-lm", f"-Wl,-rpath,{libdir}", "-o", str(exe)]
    if emulate:
        cmd += ["-DEMULATE_HALF_ADD", f"-I{inc}/internal"]
    subprocess.run(cmd, check=True)
    return exe


def run(args: list[str], timeout: float) -> dict:
    """Run the reproducer and parse its one JSON line.

    :param args: argv (list of str).
    :param timeout: seconds before it is killed (float).
    :returns: the parsed record (dict).
    :raises RuntimeError: non-zero exit or no JSON line.
    :raises subprocess.TimeoutExpired: it ran past ``timeout``.
    """
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0 or not p.stdout.strip():
        raise RuntimeError(f"{args}: rc {p.returncode}: {p.stdout[-1000:]} {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    """Build, run the three modes, write ``--out`` and print the summary.

    :returns: 0.  Raises what :func:`build` and :func:`run` raise.
    """
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="step-mode passes over the add (int)")
    ap.add_argument("--forks", type=int, default=3000, help="signal mode: at most this many forks")
    ap.add_argument(
        "--seconds", type=float, default=90.0, help="signal mode: at most this long (s)"
    )
    ap.add_argument("--emulate-runs", type=int, default=50, help="emulation forks (int)")
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    a = ap.parse_args()
    out = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "debug": bool(sysconfig.get_config_var("Py_DEBUG")),
        "gil_disabled": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
    }
    with tempfile.TemporaryDirectory() as d:
        exe = build(Path(d), emulate=False)
        step = run([str(exe), "step", str(a.repeats)], timeout=300)
        fatal = [[s[1], s[2]] for s in step["steps"] if s[5] or s[7]]
        step["fatal"] = fatal
        sig = run([str(exe), "signal", str(a.forks), str(a.seconds)], timeout=a.seconds + 120)
        bins = sig.pop("stops_by_pc")
        on_fatal = [b for b in bins if [b[0], b[1]] in fatal]
        sig["stops_on_fatal"] = sum(b[2] for b in on_fatal)
        sig["children_lost_on_fatal"] = sum(b[3] for b in on_fatal)
        sig["stops_by_pc"] = sorted(bins, key=lambda b: -b[2])
        emulate = None
        if sys.version_info >= (3, 13):
            emu = build(Path(d), emulate=True)
            emulate = run([str(emu), "emulate", str(a.emulate_runs)], timeout=300)
    out.update(step=step, signal=sig, emulate=emulate)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    subprocess.run(
        [sys.executable, str(REPO / "tools" / "provenance.py"), "stamp", str(a.out)]
        + [x for g in GLOBS for x in ("--glob", g)],
        check=True,
    )
    summary = {
        "python": out["python"],
        "add_instructions": step["add_instructions"],
        "fatal_instructions": len(fatal),
        "signal_forks": sig["forks"],
        "signal_stops_on_fatal": sig["stops_on_fatal"],
        "signal_children_lost": sig["children_lost_any"],
        "emulate": emulate
        and {k: emulate[k] for k in ("runs", "children_lost_all", "children_killed")},
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
