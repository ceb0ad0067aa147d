#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Print the x86-64 instructions of each variant's drain and producer path.

Two sources, both read with binutils (``nm``, ``objdump``), standard library
only otherwise:

``ours BINARY``
    our build: the ``lost_wakeup`` program (tests/cpp/lost_wakeup.cpp, built
    with -O2).  For each variant it finds, with ``nm -C``, the symbols of
    ``deferred_cleanup::pending_call<P>(void*)`` (the drain, the function
    given to Py_AddPendingCall), ``produce<P>`` (the destructor path: it only
    calls ``on_user_object_destroyed``, which the compiler inlines) and, when
    the compiler kept them out of line, ``schedule<P>`` and ``drain_all<P>``,
    and prints each with ``objdump -d``.

``wheel WHEEL``
    the cuda-core 1.2.0 wheel (cp312, manylinux x86-64), as published: checks
    its sha256, extracts ``cuda/core/cu13/_resource_handles.*.so``, prints the
    CPython symbols it imports (``nm -D``) and the address ranges of its
    schedule, drain, enqueue and retry functions (the shared object is
    stripped of local symbols; the ranges were found by reading the code
    around the ``Py_AddPendingCall`` call sites, and are checked below by the
    instructions they must contain).

Each printed instruction that orders memory on x86-64 is marked: a locked
read-modify-write or ``xchg`` with memory (a full barrier), ``mfence``, and a
plain byte store of 0 (``movb $0x0``: a release store, which may wait in the
store buffer while later loads run).

Usage::

    python3 tools/disasm.py ours build/lost-wakeup/lost_wakeup [-o FILE]
    python3 tools/disasm.py wheel cuda_core-1.2.0-cp312-...whl [-o FILE]

The wheel was fetched with (any machine with pip; the sha256 is checked)::

    python3 -m pip download cuda-core==1.2.0 --no-deps --only-binary=:all: \\
        --python-version 3.12 --implementation cp \\
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d DIR
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

VARIANTS = [
    ("cuda-core-1.2", "comparison::CudaCore12Policy"),
    ("seed", "comparison::SeedPolicy"),
    ("reference", "ReferencePolicy"),
]

WHEEL_NAME = "cuda_core-1.2.0-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl"
WHEEL_SHA256 = "cd36063535f75a88c4eb44ba9a678441491a5f67a72f62c2e3b797e8a052d438"
WHEEL_SO = re.compile(r"cuda/core/cu13/_resource_handles\.cpython-312-x86_64-linux-gnu\.so$")
# (name, start, stop, instructions the range must contain, what it is)
WHEEL_RANGES = [
    (
        "drain",
        0x12F60,
        0x12FDC,
        ["xchg", "movb   $0x0,0x8(%rbp)", "mov    0x0(%rbp),%rax"],
        "the pending call: finalizing checks, exchange loop, clear of scheduled_, "
        "re-check of head_",
    ),
    (
        "schedule",
        0x12EF0,
        0x12F5F,
        ["lock cmpxchg %cl", "Py_AddPendingCall"],
        "schedule(): accepting_, finalizing, head_ test, CAS of scheduled_, Py_AddPendingCall",
    ),
    (
        "enqueue",
        0x147B0,
        0x14830,
        ["lock cmpxchg %rdi", "lock cmpxchg %cl"],
        "the destructor path: push CAS on head_, then schedule() inlined",
    ),
    (
        "retry",
        0x14720,
        0x147A7,
        ["lock cmpxchg %cl", "Py_AddPendingCall"],
        "the entry points' retry: schedule() on the published queue",
    ),
]
WHEEL_IMPORTS = [
    "Py_AddPendingCall",
    "Py_IsInitialized",
    "_Py_IsFinalizing",
    "Py_IsFinalizing",
    "Py_AtExit",
]


def tool(name: str) -> str:
    exe = shutil.which(name)
    if exe is None:
        raise SystemExit(f"disasm: {name} not found (binutils)")
    return exe


def mark(line: str) -> str:
    """Append a note to instructions that order memory on x86-64."""
    ins = line.split("\t")[-1] if "\t" in line else line
    if re.search(r"\block\b", ins):
        return f"{line}    <- locked RMW: full barrier"
    if re.match(r"\s*xchg\s+%\w+,-?(0x[0-9a-f]+)?\(", ins) or re.match(r"\s*xchg\s+.*\(%", ins):
        return f"{line}    <- xchg with memory: locked, full barrier"
    if re.match(r"\s*mfence", ins):
        return f"{line}    <- mfence: full barrier"
    if re.match(r"\s*movb\s+\$0x0,", ins) and "(%rsp)" not in ins:  # not a local
        return f"{line}    <- plain byte store of 0: may wait in the store buffer"
    return line


DECORATION = re.compile(
    r"^(?P<head>\s*[0-9a-f]+:\t[^<]*?) <(?P<sym>.*?)(?:\+0x(?P<off>[0-9a-f]+))?>$"
)


def short_name(symbol: str) -> str:
    """A demangled name without ``deferred_cleanup::`` (and its
    ``comparison::``), ``(anonymous namespace)::`` and GCC's ``[clone .isra.0]``
    suffixes."""
    symbol = (
        symbol.replace("deferred_cleanup::comparison::", "")
        .replace("deferred_cleanup::", "")
        .replace("(anonymous namespace)::", "")
    )
    return re.sub(r" \[clone [^]]*\]", "", symbol)


def callee_name(symbol: str) -> str:
    """A jump or call target as a reader needs it: :func:`short_name`
    without the return type and the parameter list."""
    name, depth, cut = short_name(symbol), 0, None
    for i, ch in enumerate(name):  # drop the outermost trailing (...)
        depth += ch in "(<" or -(ch in ")>")
        if ch == "(" and depth == 1 and cut is None and i > 0:
            cut = i
    name = name[:cut] if cut else name
    depth, start = 0, 0
    for i, ch in enumerate(name):  # drop a return type: the last top-level space
        depth += ch in "(<" or -(ch in ")>")
        if ch == " " and depth == 0 and not name[:i].endswith("operator"):
            start = i + 1
    return name[start:]


def shorten(line: str, function: str | None = None) -> str:
    """Keep an instruction line short enough for the docs' column: a jump
    inside ``function`` names its target as ``<+0xOFF>``; any other symbol
    is written by :func:`short_name`.  Other lines are returned as they are."""
    m = DECORATION.match(line)
    if not m:
        return line
    sym, off = m["sym"], m["off"]
    if function is not None and sym == function and off:
        return f"{m['head']} <+0x{off}>"
    sym = callee_name(sym)
    return f"{m['head']} <{sym}{'+0x' + off if off else ''}>"


def objdump(path: Path, start: int, stop: int) -> list[str]:
    out = subprocess.run(
        [
            tool("objdump"),
            "-d",
            "-C",
            "--no-show-raw-insn",
            "-w",
            f"--start-address={start:#x}",
            f"--stop-address={stop:#x}",
            str(path),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    lines = [ln.rstrip() for ln in out.splitlines() if re.match(r"\s+[0-9a-f]+:\t", ln)]
    # Symbol decorations like <__cxa_call_terminate@@Base+0xa3c> in a stripped
    # object are nearest-symbol guesses: drop them.
    return [re.sub(r" <[^<>\s]+@@Base\+0x[0-9a-f]+>", "", ln) for ln in lines]


def ours(binary: Path) -> str:
    nm = subprocess.run(
        [tool("nm"), "-C", "-S", "--defined-only", str(binary)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    syms = []
    for ln in nm.splitlines():
        parts = ln.split(" ", 3)
        if len(parts) == 4 and parts[2] in "TtWw":
            syms.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
    cc = subprocess.run(["strings", "-a", str(binary)], capture_output=True, text=True).stdout
    gcc = next((ln for ln in cc.splitlines() if ln.startswith("GCC: ")), "compiler unknown")
    out = [
        f"# {binary.name}: {gcc}; built with -O2 by tools/evidence.py",
        "# generated by tools/disasm.py ours; symbols found with nm -C; jump targets",
        "# inside the function are written <+0xOFFSET>; names are shortened (disasm.short_name)",
        "",
    ]
    for vname, policy in VARIANTS:
        wanted = [
            (
                "drain",
                rf"^int deferred_cleanup::pending_call<deferred_cleanup::{policy}>\(void\*\)$",
            ),
            ("producer", rf"produce<deferred_cleanup::{policy}>\("),
            ("schedule", rf"deferred_cleanup::schedule<deferred_cleanup::{policy}>\("),
            ("drain_all", rf"deferred_cleanup::drain_all<deferred_cleanup::{policy}>\("),
        ]
        for what, pat in wanted:
            hits = [s for s in syms if re.search(pat, s[2])]
            if not hits:
                if what in ("schedule", "drain_all"):
                    continue  # inlined into its callers
                raise SystemExit(f"disasm: no symbol for {vname} {what} ({pat}) in {binary}")
            addr, size, name = hits[0]
            out.append(f"## {vname}: {what} -- {short_name(name)}")
            out.extend(mark(shorten(ln, name)) for ln in objdump(binary, addr, addr + size))
            out.append("")
    return "\n".join(out)


def wheel(path: Path) -> str:
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != WHEEL_SHA256:
        raise SystemExit(f"disasm: {path.name} has sha256 {digest}, expected {WHEEL_SHA256}")
    with zipfile.ZipFile(path) as z, tempfile.TemporaryDirectory() as tmp:
        names = [n for n in z.namelist() if WHEEL_SO.search(n)]
        if len(names) != 1:
            raise SystemExit(f"disasm: {path.name}: no single _resource_handles .so ({names})")
        so = Path(z.extract(names[0], tmp))
        dyn = subprocess.run(
            [tool("nm"), "-D", str(so)], check=True, capture_output=True, text=True
        ).stdout
        imports = {ln.split()[-1] for ln in dyn.splitlines() if ln.split()[:1] == ["U"]}
        out = [
            f"# {WHEEL_NAME}",
            f"# sha256 {digest}",
            f"# file {names[0]}",
            "# generated by tools/disasm.py wheel (nm -D, objdump -d --no-show-raw-insn)",
            "",
            "## nm -D: CPython life-cycle symbols imported (U) or absent",
        ]
        for sym in WHEEL_IMPORTS:
            out.append(f"{'U' if sym in imports else '-'} {sym}")
        out.append("")
        for name, start, stop, must, what in WHEEL_RANGES:
            lines = objdump(so, start, stop)
            text = "\n".join(lines)
            missing = [m for m in must if m not in text]
            if missing:
                raise SystemExit(f"disasm: wheel {name} at {start:#x}: missing {missing}")
            out.append(f"## wheel: {name} ({start:#x}-{stop:#x}): {what}")
            out.extend(mark(ln) for ln in lines)
            out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("ours", help="our lost_wakeup binary")
    a.add_argument("binary", type=Path)
    a.add_argument("-o", "--output", type=Path)
    b = sub.add_parser("wheel", help="the cuda-core 1.2.0 wheel")
    b.add_argument("wheel", type=Path)
    b.add_argument("-o", "--output", type=Path)
    args = ap.parse_args(argv)
    text = ours(args.binary) if args.cmd == "ours" else wheel(args.wheel)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text + "\n")
        print(f"disasm: wrote {args.output}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
