#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Standalone reproducers of three holes in cuda-core's deferred cleanup.

Runs against the cuda-core that ``python3 -m pip install cuda-core`` put into
this interpreter; imports nothing of the deferred-cleanup project.  Needs
binutils (``objdump``, ``nm``) and, for the C++ part, ``g++``; the GPU parts
need an NVIDIA GPU and skip, with the reason, without one::

    python3 cuda_core_holes.py [--json PATH] [--site DIR] [--x-runs 10]
        [--fin-runs 30] [--e-seconds 8] [--sb-iterations 2000000]

Prints one line per hole, ``<hole>: reproduced|not reproduced|skipped (...)``
with its counts, and with ``--json`` writes every figure.  Exit status 0
(a hole reproduced is a result, not an error); 2 when no cuda-core is found.

The holes (source: cuda-python, ``cuda_core/cuda/core/_cpp/rt/
py_deferred_cleanup.cpp`` at commit 08f74293; ``_cpp/resource_handles.cpp``
at the cuda-core 1.2.0 tag):

store-buffering
    The drain's tail clears the scheduled flag with a release store and then
    re-reads the queue head with an acquire load.  Nothing orders that load
    after the store, so a producer's push can slip between them unseen while
    the producer's claim still reads the old ``true``: an item stays queued
    with no pending call (a lost wakeup).  The window is a few nanoseconds, so
    the wheel is driven at it on the GPU (scenario E: many short graphs) but
    not expected to show it; the evidence that runs against the real binary is
    the instruction shape, found by ``objdump`` in the installed shared
    object, and the same shape compiled from ``sb_shape.cpp`` (beside this
    file), which shows the lost wakeups at the CPU's own rate.
exit-release
    No exit hook releases what is queued: payloads whose graphs are destroyed
    on a script's last line are released by the CUDA destructor thread after
    Python began to finalize, the schedule step sees the finalizing flag and
    returns, and the payloads are never released (scenario X).
finalization
    The schedule step tests ``!Py_IsInitialized() || _Py_IsFinalizing()`` and
    then calls ``Py_AddPendingCall`` with nothing that keeps finalization from
    finishing in between (check-then-act).  On CPython 3.10-3.12 a call after
    ``Py_FinalizeEx`` crashes the process.  The GPU part ends many processes
    while destructor callbacks fire and counts abnormal exits; the static part
    shows the check and the call with no gate between them in the binary.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# One thread spinning on %globaltimer for the u64 parameter's nanoseconds.
SPIN_PTX = r"""
.version 7.0
.target sm_75
.address_size 64
.visible .entry spin_ns(.param .u64 p_ns)
{
  .reg .pred %p;
  .reg .b64 %r<5>;
  ld.param.u64 %r1, [p_ns];
  mov.u64 %r2, %globaltimer;
LOOP:
  mov.u64 %r3, %globaltimer;
  sub.s64 %r4, %r3, %r2;
  setp.lt.u64 %p, %r4, %r1;
  @%p bra LOOP;
  ret;
}
"""


# ---------------------------------------------------------------- locating
def find_site(override: str | None) -> Path | None:
    """The installed ``cuda/core`` folder (without importing cuda.core)."""
    if override:
        p = Path(override)
        return p / "cuda" / "core" if (p / "cuda" / "core").is_dir() else p
    try:
        spec = importlib.util.find_spec("cuda.core")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def core_version(core: Path) -> str:
    v = core / "_version.py"
    if v.is_file():
        m = re.search(r"""version\s*=\s*['"]([^'"]+)""", v.read_text())
        if m:
            return m.group(1)
    for d in core.parent.parent.glob("cuda_core-*.dist-info"):
        return d.name.split("-")[1]
    return "?"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------- objdump
INSN = re.compile(r"^\s*([0-9a-f]+):\s+(.*?)\s*$")


def disassemble(so: Path) -> list[tuple[int, str]]:
    out = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", str(so)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    insns = []
    for line in out.splitlines():
        m = INSN.match(line)
        if m and "\t" not in m.group(2)[:0]:
            insns.append((int(m.group(1), 16), re.sub(r"\s+", " ", m.group(2))))
    return insns


def mem_base(operand: str) -> tuple[str, str] | None:
    """'0x8(%rbp)' -> ('0x8', 'rbp'); '(%rbx)' -> ('0x0', 'rbx')."""
    m = re.fullmatch(r"(0x[0-9a-f]+)?\(%(\w+)\)", operand)
    return (m.group(1) or "0x0", m.group(2)) if m else None


def drain_tails(insns: list[tuple[int, str]]) -> list[dict]:
    """The drain-tail shape: ``xchg %r,(B)`` (the take loop), later a plain
    byte store of 0 to ``off(B)`` (the clear) directly followed by a plain
    ``mov (B),%r`` (the re-check of the head at offset 0 of the same object),
    with no fence or locked instruction in between."""
    found = []
    for k in range(1, len(insns) - 1):
        a, s = insns[k]
        m = re.fullmatch(r"movb \$0x0,(\S+)", s)
        if not m or not (st := mem_base(m.group(1))):
            continue
        b, ld = insns[k + 1]
        m2 = re.fullmatch(r"mov (\S+),%(\w+)", ld)
        if not m2 or not (src := mem_base(m2.group(1))) or src != ("0x0", st[1]):
            continue
        take = None
        for j in range(k - 1, max(0, k - 40), -1):
            mx = re.fullmatch(r"xchg %\w+,(\S+)", insns[j][1])
            if mx and mem_base(mx.group(1)) == ("0x0", st[1]):
                take = insns[j]
                break
        if take is None:
            continue
        found.append(
            {
                "take": f"{take[0]:#x}: {take[1]}",
                "clear": f"{a:#x}: {s}",
                "recheck": f"{b:#x}: {ld}",
                "fence_between": False,
            }
        )
    return found


def check_then_act(insns: list[tuple[int, str]]) -> list[dict]:
    """Each call of Py_AddPendingCall preceded, within 40 instructions, by a
    call of _Py_IsFinalizing / Py_IsFinalizing: the check and the act, with
    the instructions between them (a locked instruction would be a gate's
    trace; the shipped code has the claim's ``lock cmpxchg`` there)."""
    found = []
    for k, (a, s) in enumerate(insns):
        if not re.search(r"call .*<Py_AddPendingCall@plt>", s):
            continue
        for j in range(k - 1, max(0, k - 40), -1):
            if re.search(r"call .*<_?Py_IsFinalizing@plt>", insns[j][1]):
                between = [t for _, t in insns[j + 1 : k]]
                found.append(
                    {
                        "check": f"{insns[j][0]:#x}: {insns[j][1]}",
                        "act": f"{a:#x}: {s}",
                        "instructions_between": len(between),
                        "calls_between": [t for t in between if t.startswith("call")],
                    }
                )
                break
    return found


def dynamic_symbols(so: Path) -> dict:
    out = subprocess.run(["nm", "-D", str(so)], check=True, capture_output=True, text=True).stdout
    names = {ln.split()[-1] for ln in out.splitlines() if ln.split()}
    want = ["Py_AddPendingCall", "Py_IsInitialized", "_Py_IsFinalizing", "Py_IsFinalizing"]
    want += ["Py_AtExit", "PyUnstable_AtExit"]
    return {w: (w in names) for w in want}


def static_evidence(core: Path) -> dict:
    out = {}
    for so in sorted(core.rglob("_resource_handles*.so")):
        insns = disassemble(so)
        out[str(so.relative_to(core.parent.parent))] = {
            "sha256": sha256(so),
            "imports": dynamic_symbols(so),
            "drain_tails": drain_tails(insns),
            "check_then_act": check_then_act(insns),
        }
    return out


# ---------------------------------------------------------------- C++ shape
def cpp_shape(iterations: int, workdir: Path) -> dict:
    gxx = shutil.which("g++")
    if gxx is None:
        return {"skipped": "no g++"}
    exe = workdir / "sb_shape"
    subprocess.run(
        [gxx, "-O2", "-std=c++17", "-pthread", str(HERE / "sb_shape.cpp"), "-o", str(exe)],
        check=True,
    )
    insns = disassemble(exe)
    res = {
        "compiler": subprocess.run([gxx, "--version"], capture_output=True, text=True).stdout.split(
            "\n"
        )[0]
    }
    # The harness's drain uses a global object: its tail is `movb $0,X(%rip)`
    # then `mov Y(%rip),%r`; report the store/load pair as the wheel's is.
    sym = subprocess.run(["nm", "-C", str(exe)], capture_output=True, text=True).stdout
    for mode, flag in (("shipped", "false"), ("fixed", "true")):
        m = re.search(r"^([0-9a-f]+) t .*drain<" + flag + r">\(\)$", sym, re.M)
        shape = []
        if m:
            start = int(m.group(1), 16)
            body = [t for t in insns if start <= t[0] < start + 0x60]
            for k in range(len(body) - 1):
                if "g_scheduled" in body[k][1] or re.match(r"(movb|xchg) .*%rip", body[k][1]):
                    shape = [f"{a:#x}: {s}" for a, s in body[k : k + 2]]
                    if "scheduled" in body[k][1] or body[k][1].startswith(("movb", "xchg %al")):
                        break
        r = subprocess.run(
            [str(exe), mode, str(iterations)], capture_output=True, text=True, timeout=300
        )
        line = r.stdout.strip()
        kv = dict(p.split("=", 1) for p in line.split()[1:] if "=" in p)
        res[mode] = {
            "line": line,
            "iterations": int(kv.get("iterations", 0)),
            "lost": int(kv.get("lost", -1)),
            "pinned": kv.get("pinned") == "yes",
            "drain_tail": shape,
        }
    return res


# ---------------------------------------------------------------- GPU child
_ALIVE: list = []  # a child's device objects: alive until the interpreter exits


def child_main(kind: str, arg: str) -> int:
    """One process: graphs whose memset nodes own payloads (``dst_owner``),
    behind a spin kernel; each payload's ``__del__`` writes one line to the
    release log, the inherited descriptor named by ``REPRO_LOG_FD``."""
    import ctypes

    import cuda.core as cc
    from cuda.core.graph import GraphDefinition

    write, fd = os.write, int(os.environ["REPRO_LOG_FD"])

    class Payload:
        __slots__ = ("i",)

        def __init__(self, i: int) -> None:
            self.i = i

        def __del__(self) -> None:
            write(fd, b"released %d\n" % self.i)

    dev = cc.Device(0)
    dev.set_current()
    stream = dev.create_stream()
    kernel = cc.ObjectCode.from_ptx(SPIN_PTX.encode()).get_kernel("spin_ns")
    config = cc.LaunchConfig(grid=1, block=1)
    buf = dev.allocate(1 << 16, stream=stream)
    stream.sync()
    ptr = int(buf.handle)
    made = 0
    try:  # the kernel's u64 argument: numpy's type where numpy is installed
        import numpy as np

        u64 = np.uint64
    except ImportError:
        u64 = ctypes.c_uint64

    def graph(n: int, spin_ns: int):
        nonlocal made
        g = GraphDefinition()
        first = g.launch(config, kernel, u64(spin_ns)) if spin_ns else g
        for _ in range(n):
            first.memset(ptr + (made % 4096), 0, 1, dst_owner=Payload(made))
            made += 1
        return g

    if kind == "exit":  # 8 graphs x 25 payloads behind 50 ms kernels; dropped on the last line
        execs = [graph(25, 50_000_000).instantiate() for _ in range(8)]
        for e in execs:
            e.launch(stream)
        write(fd, b"made %d\n" % made)
        _ALIVE.extend((dev, stream, buf, kernel))  # alive until the interpreter exits
        for e in execs:
            e.close()
        del execs
        write(fd, b"last-line\n")
        return 0
    if kind == "fin":  # destructor callbacks spread over the interpreter's exit
        offset_us = int(arg)
        execs = [graph(4, (offset_us + 40 * k) * 1000).instantiate() for k in range(16)]
        for e in execs:
            e.launch(stream)
        write(fd, b"made %d\n" % made)
        _ALIVE.extend((dev, stream, buf, kernel))
        for e in execs:
            e.close()
        del execs
        return 0
    if kind == "hunt":  # scenario E: short graphs back to back, the main thread draining
        seconds = float(arg)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            e = graph(4, 20_000).instantiate()
            e.launch(stream)
            e.close()
            del e
            time.sleep(0)
        write(fd, b"made %d\n" % made)
        t = time.monotonic() + 1.0  # sleeps only: no entry point that would retry
        while time.monotonic() < t:
            time.sleep(0.001)
        write(fd, b"settled\n")
        GraphDefinition()  # one entry point: the wheel's retry of a stranded queue
        stream.sync()
        time.sleep(0.3)
        write(fd, b"after-entry\n")
        return 0
    raise SystemExit(f"unknown child kind {kind}")


def run_child(kind: str, arg: str, timeout: float) -> dict:
    """Run one child; it writes its release log to an inherited temporary file.

    The descriptor keeps its number and is named in ``REPRO_LOG_FD``: a number
    made in ``preexec_fn`` would be closed again by ``close_fds`` (which runs
    after it), and the CUDA driver then reuses it for a device file."""
    with tempfile.TemporaryFile() as log:
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", REPRO_LOG_FD=str(log.fileno()))
        p = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--child", kind, arg],
            pass_fds=(log.fileno(),),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
        )
        timed_out = False
        try:
            out, _ = p.communicate(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            timed_out = True
            p.kill()
            out, _ = p.communicate()
        log.seek(0)
        lines = log.read().decode(errors="replace").splitlines()
    made = next((int(x.split()[1]) for x in lines if x.startswith("made ")), 0)
    rel = [x for x in lines if x.startswith("released ")]
    return {
        "timed_out": timed_out,
        "rc": p.returncode,
        "made": made,
        "released": len(rel),
        "lines": lines,
        "output_tail": out.decode(errors="replace")[-2000:],
    }


def gpu_available() -> str | None:
    """None when a GPU and cuda.core are usable, else the reason."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return f"no NVIDIA driver (libcuda.so.1: {e})"
    if cuda.cuInit(0) != 0:
        return "no usable GPU (cuInit failed)"
    n = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(n)) != 0 or n.value < 1:
        return "no CUDA device"
    try:
        import cuda.core  # noqa: F401
    except Exception as e:  # noqa: BLE001 -- any import failure is a reason to skip
        return f"cuda.core does not import: {e!r}"
    return None


# ---------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json")
    ap.add_argument("--site", help="a folder holding cuda/core (default: the installed one)")
    ap.add_argument("--x-runs", type=int, default=10)
    ap.add_argument("--fin-runs", type=int, default=30)
    ap.add_argument("--e-seconds", type=float, default=8.0)
    ap.add_argument("--sb-iterations", type=int, default=2_000_000)
    ap.add_argument(
        "--budget-s",
        type=float,
        default=1e9,
        help="wall-clock budget (s): GPU runs that would start after it are left out",
    )
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child_main(*a.child)

    t_start = time.monotonic()

    def left() -> float:
        """Seconds left of --budget-s."""
        return a.budget_s - (time.monotonic() - t_start)

    core = find_site(a.site)
    if core is None or not core.is_dir():
        print("cuda-core not found: pip install cuda-core, or pass --site")
        return 2
    res: dict = {
        "schema": 1,
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "cpu": next(
                (
                    ln.split(":", 1)[1].strip()
                    for ln in Path("/proc/cpuinfo").read_text().splitlines()
                    if ln.startswith("model name")
                ),
                "?",
            )
            if Path("/proc/cpuinfo").exists()
            else "?",
        },
        "cuda_core": {"version": core_version(core), "path": str(core)},
        "script_sha256": sha256(Path(__file__).resolve()),
        "sb_shape_sha256": sha256(HERE / "sb_shape.cpp"),
    }
    lines = []

    # -- static: the installed binaries
    st = static_evidence(core)
    res["static"] = st
    tails = sum(len(v["drain_tails"]) for v in st.values())
    cta = sum(len(v["check_then_act"]) for v in st.values())
    atexit_any = any(
        v["imports"]["Py_AtExit"] or v["imports"]["PyUnstable_AtExit"] for v in st.values()
    )

    # -- store buffering: C++ shape, then the wheel on the GPU
    with tempfile.TemporaryDirectory() as td:
        try:
            res["cpp_shape"] = cpp_shape(a.sb_iterations, Path(td))
        except (subprocess.SubprocessError, OSError) as e:
            res["cpp_shape"] = {"skipped": f"{type(e).__name__}: {e}"}
    why_no_gpu = gpu_available()
    res["gpu"] = why_no_gpu or "available"
    cs = res["cpp_shape"]
    shape_txt = (
        f"C++ shape lost {cs['shipped']['lost']}/{cs['shipped']['iterations']}, "
        f"fixed {cs['fixed']['lost']}/{cs['fixed']['iterations']}"
        if "shipped" in cs
        else f"C++ shape skipped ({cs.get('skipped')})"
    )
    if why_no_gpu is None:
        h = run_child("hunt", str(a.e_seconds), min(a.e_seconds + 60, left()))
        i_set = h["lines"].index("settled") if "settled" in h["lines"] else len(h["lines"])
        before = sum(1 for x in h["lines"][:i_set] if x.startswith("released "))
        h_fig = {
            "rc": h["rc"],
            "payloads": h["made"],
            "released_before_settle_end": before,
            "stranded_after_1s": h["made"] - before,
            "released_total": h["released"],
            "output_tail": h["output_tail"] if h["rc"] else "",
        }
        res["hunt"] = h_fig
        wheel_txt = f"wheel stranded {h_fig['stranded_after_1s']} of {h['made']} payloads"
        if h["rc"] != 0:  # a crashed or killed hunt proves nothing either way
            wheel_txt += f" (hunt exited {h['rc']}, not counted)"
            h_fig["stranded_after_1s"] = 0
    else:
        res["hunt"] = {"skipped": why_no_gpu}
        wheel_txt = f"wheel hunt skipped ({why_no_gpu})"
    sb_lost = cs.get("shipped", {}).get("lost", 0)
    wheel_lost = res["hunt"].get("stranded_after_1s", 0)
    verdict = "reproduced" if wheel_lost > 0 else "not reproduced on the wheel"
    lines.append(
        f"store-buffering: {verdict} ({wheel_txt}); window too narrow to aim at from Python; "
        f"shape in installed binary: {tails} drain tail(s) with clear+re-check and no fence; "
        f"{shape_txt}" + ("; shape reproduced" if sb_lost > 0 else "")
    )

    # -- exit release (scenario X)
    if why_no_gpu is None:
        runs = [run_child("exit", "", min(30, left())) for _ in range(a.x_runs) if left() > 15]
        ok = [r for r in runs if r["rc"] == 0]  # a crash or a timeout is counted apart
        made = sum(r["made"] for r in ok)
        rel = sum(r["released"] for r in ok)
        res["exit"] = {
            "runs": len(runs),
            "runs_exit_0": len(ok),
            "timed_out": sum(r["timed_out"] for r in runs),
            "payloads": made,
            "released": rel,
            "per_run": [[r["rc"], r["made"], r["released"]] for r in runs],
            "output_tail": next((r["output_tail"] for r in runs if r["rc"]), ""),
        }
        v = "reproduced" if rel < made else "not reproduced" if ok else "no run exited 0"
        lines.append(
            f"exit-release: {v} (released {rel} of {made} payloads in {len(ok)} runs that "
            f"exited 0, of {len(runs)}; "
            f"Py_AtExit imported: {atexit_any})"
        )
    else:
        res["exit"] = {"skipped": why_no_gpu}
        lines.append(f"exit-release: skipped ({why_no_gpu}); Py_AtExit imported: {atexit_any}")

    # -- finalization (check-then-act)
    if why_no_gpu is None:
        runs = [
            run_child("fin", str(k * 997 % 2000), min(30, left()))
            for k in range(a.fin_runs)
            if left() > 15
        ]
        bad = [r for r in runs if r["rc"] != 0 and not r["timed_out"]]
        res["finalization"] = {
            "runs": len(runs),
            "abnormal_exits": len(bad),
            "timed_out": sum(r["timed_out"] for r in runs),
            "exit_codes": sorted({r["rc"] for r in runs}),
            "payloads": sum(r["made"] for r in runs),
            "released": sum(r["released"] for r in runs),
            "output_tail": bad[0]["output_tail"] if bad else "",
        }
        v = "reproduced" if bad else "not reproduced"
        lines.append(
            f"finalization: {v} ({len(bad)} abnormal exits in {len(runs)} runs, "
            f"CPython {platform.python_version()}; check-then-act sites in binary: {cta})"
        )
    else:
        res["finalization"] = {"skipped": why_no_gpu}
        lines.append(f"finalization: skipped ({why_no_gpu}); check-then-act sites in binary: {cta}")

    res["lines"] = lines
    res["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for ln in lines:
        print(ln)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
