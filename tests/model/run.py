#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Run spin on the deferred-cleanup model and report in JSON.

Each check compiles the model with a set of -D macros into its own pan
verifier (spin -a, then gcc with -DCOLLAPSE), runs it exhaustively and parses
what pan prints: errors, states stored and matched, transitions, depth, memory,
time, and the statements never reached.

Usage:
  tests/model/run.py [--json OUT] [--only NAME,...] [--list] [--variant NAME]

Without --only every check in CHECKS runs.  --variant NAME runs instead the
checks that verify the rule (not the negative variants, the witnesses or the
by-hand runs) on a candidate rule, with that variant's macros added: it is
the opt-in run whose result docs/_data/model-<NAME>.json records (see
VARIANTS).  --variant cuda-core and --variant cuda-core-fixed run the checks
of the cuda-core drain's model (cuda_core.pml, CC_VARIANTS) for the shipped
shape and for its minimal fix, each with its own expectation: the records
docs/_data/model-cuda-core.json and model-cuda-core-fixed.json.  Needs spin and gcc on PATH (the
Debian unstable root has both: tools/sid-root.sh).  Only the standard library.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = HERE / "deferred_cleanup.pml"
# The cuda-core 1.2 drain (the variants cuda-core-1.2 and cuda-core-1.2-fixed):
# a model of its own, see its header for why.
CC_MODEL = HERE / "cuda_core.pml"

# pan compile flags: COLLAPSE compresses state vectors (exhaustive, no loss);
# VECTORSZ is ample for N <= 5.  Witnesses stop at their first hit, so they
# are compiled with -O0 (gcc -O2 on pan.c takes longer than their search);
# the others with -O2.
PAN_CFLAGS = ["-w", "-DCOLLAPSE", "-DVECTORSZ=2048"]
# pan run flags: -m is the depth bound of the search stack; the model's
# depth stays far below it (test_model.py checks "depth reached" < bound).
DEPTH_BOUND = 100000


@dataclasses.dataclass(frozen=True)
class Check:
    name: str
    macros: tuple[str, ...]  # spin -D macros
    liveness: bool = False  # pan -a -f with the ltl claim `drained`
    expect_error: bool = False  # a negative variant or a witness
    why: str = ""
    by_hand: bool = False  # minutes: test_model.py runs it only with DC_MODEL_SLOW=1
    model: Path = MODEL  # the Promela file


def _base(n: int, k: int, lost: int = 0) -> tuple[str, ...]:
    return (f"N={n}", f"K={k}", f"LOST={lost}")


# Sizes: two producers, the retrier, one entry point and the foreign caller.
# The model follows the current re-arm rule step by step, and a run with the
# retrier and lost calls stores tens of millions of states, so most checks
# leave the retrier out (suffix _nr, macro NO_RETRIER: two producers, the
# main thread and the foreign caller) and keep every check under about a
# minute on two shared cores.  The retrier (a third thread that claims or
# looks while the others re-arm) is what found the two defects of the rule
# before commits 5c53945 and e9c0da5 (negative variants records_first and
# drop_clock).  safety_n2_k1 and liveness_n2_norefusal_lost1 keep it (about a
# minute each); the other runs with it take minutes and are by_hand:
# test_model.py runs them only with DC_MODEL_SLOW=1.
_NR = ("NO_RETRIER",)
_LIVE = ("FOREIGN=0", "LIVENESS")
CHECKS: list[Check] = [
    Check(
        "safety_n2_k1",
        _base(2, 1),
        why="exactly once or leaked; nothing after teardown; at most one outstanding pending call",
    ),
    Check(
        "safety_n2_k1_lost1_nr",
        _base(2, 1, 1) + _NR,
        why="as safety_n2_k1, with a lost call and the re-arm",
    ),
    Check(
        "safety_n2_k2_lost1_nr",
        _base(2, 2, 1) + _NR,
        why=(
            "with room for two of our calls: at most two outstanding unless the main thread "
            "re-armed"
        ),
    ),
    Check(
        "safety_n2_k2_lost2_nr", _base(2, 2, 2) + _NR, why="safety holds whatever the host loses"
    ),
    Check(
        "safety_n2_k3_lost2_nr",
        _base(2, 3, 2) + _NR,
        why="two losses, room for three: at most three outstanding (the main thread's re-arm)",
    ),
    Check(
        "liveness_n2_k1_norearm_nr",
        _base(2, 1) + ("LIVENESS", "NO_REARM") + _NR,
        liveness=True,
        why=(
            "no lost call and no re-arm: the fast path, refusals and clear-then-take never strand "
            "an item"
        ),
    ),
    Check(
        "liveness_lost1_nr",
        _base(2, 3, 1) + _LIVE + _NR,
        liveness=True,
        why="one lost call: the re-arm restores the pending-call path",
    ),
    Check(
        "liveness_n2_norefusal_lost1",
        _base(2, 3, 1) + _LIVE,
        liveness=True,
        why=(
            "with the retrier, re-arms and one lost call or none, no refusal: every queued item "
            "is drained"
        ),
    ),
    Check(
        "liveness_refusal_nr",
        _base(2, 1) + ("LIVENESS",) + _NR,
        liveness=True,
        why=(
            "refusals (a ring of one shared with a foreign caller): re-arms, refused re-arms, "
            "give-backs"
        ),
    ),
    Check(
        "liveness_lost_apart_nr",
        _base(2, 3, 2) + _LIVE + ("LOST_APART", "NO_MAIN_REARM") + _NR,
        liveness=True,
        why=(
            "two lost calls, not in a row, without the main thread's re-arm: the rule within the "
            "bound recovers"
        ),
    ),
    Check(
        "liveness_lost2_nr",
        _base(2, 3, 2) + _LIVE + _NR,
        liveness=True,
        why="two lost calls in a row: a main-thread look at the stale claim recovers",
    ),
    # With the retrier: a minute or more each.
    Check(
        "rearm_refusal",
        _base(2, 1) + ("LIVENESS",),
        liveness=True,
        by_hand=True,
        why="liveness_refusal_nr with the retrier",
    ),
    Check(
        "liveness_lost_apart",
        _base(2, 3, 2) + _LIVE + ("LOST_APART", "NO_MAIN_REARM"),
        liveness=True,
        by_hand=True,
        why="liveness_lost_apart_nr with the retrier",
    ),
    Check(
        "liveness_lost2",
        _base(2, 3, 2) + _LIVE,
        liveness=True,
        by_hand=True,
        why="liveness_lost2_nr with the retrier",
    ),
    # Negative variants: each must yield a counterexample.
    Check(
        "lost_wakeup",
        _base(2, 1) + ("LIVENESS", "LOST_WAKEUP"),
        liveness=True,
        expect_error=True,
        why="take, then clear scheduled_, with no re-check: an item is stranded",
    ),
    Check(
        "fast_reordered",
        _base(2, 1) + ("LIVENESS", "FAST_REORDERED"),
        liveness=True,
        expect_error=True,
        why="the fast-path load before the push (store buffering): an item is stranded",
    ),
    Check(
        "no_gate",
        _base(2, 1) + ("NO_GATE",),
        expect_error=True,
        why="no in-flight gate: Py_AddPendingCall after teardown",
    ),
    Check(
        "retry_enqueues",
        _base(2, 1) + ("RETRY_ENQUEUES",),
        expect_error=True,
        why="a retry that pushes the item again: cleaned twice",
    ),
    Check(
        "no_rearm",
        _base(2, 1, 1) + ("LIVENESS", "NO_REARM"),
        liveness=True,
        expect_error=True,
        why="without the re-arm one lost call leaves scheduled_ set for good",
    ),
    # The limit of the rule within the bound (liveness_lost2_nr is the same
    # run with the main thread's re-arm).
    Check(
        "lost_both_nr",
        _base(2, 3, 2) + _LIVE + ("NO_MAIN_REARM",) + _NR,
        liveness=True,
        expect_error=True,
        why=(
            "without the main thread's re-arm: the first call and its re-armed call both lost, "
            "nothing recovers"
        ),
    ),
    # The candidate rule "the flag holds the claim's number" (FLAG_SEQ; see
    # VARIANTS): with a third producer and one lost call spin finds the
    # clear-then-stop window (the claim's call clears scheduled_ with its CAS
    # and only then stops the stale clock, so a new claim's clock is stopped),
    # and with the stop moved before the CAS the window against a re-arm.
    Check(
        "flag_seq",
        _base(3, 3, 1) + _LIVE + _NR + ("FLAG_SEQ",),
        liveness=True,
        expect_error=True,
        why=(
            "scheduled_ holds the claim's number: a new claim between the clear and "
            "stop_stale_clock loses its clock; its call lost, nothing re-arms"
        ),
    ),
    Check(
        "flag_seq_stop_first",
        _base(3, 3, 1) + _LIVE + _NR + ("FLAG_SEQ", "FLAG_SEQ_STOP_FIRST"),
        liveness=True,
        expect_error=True,
        why=(
            "as flag_seq with the clock stopped before the CAS: a re-arm between the two "
            "loses its clock"
        ),
    ),
    # The candidate layout "one state word" (ONE_WORD; docs/design/scheduling.rst):
    # the lifecycle state, the claim and the in-flight count in one word, so
    # schedule()'s entry is one compare-and-swap; ONE_WORD_LLIST adds the
    # llist_add decision (only a push onto an empty list schedules).  The
    # whole set of checks on each is the opt-in --variant run (VARIANTS); these
    # are its bounded representatives for make test.
    Check(
        "one_word_lost1_nr",
        _base(2, 3, 1) + _LIVE + _NR + ("ONE_WORD",),
        liveness=True,
        why="one state word: one lost call, the re-arm restores the pending-call path",
    ),
    Check(
        "one_word_llist_lost1_nr",
        _base(2, 3, 1) + _LIVE + _NR + ("ONE_WORD", "ONE_WORD_LLIST"),
        liveness=True,
        why="one state word, llist_add decides: one lost call, the re-arm recovers",
    ),
    Check(
        "one_word_llist_refusal_nr",
        _base(2, 1) + ("LIVENESS",) + _NR + ("ONE_WORD", "ONE_WORD_LLIST"),
        liveness=True,
        why="one state word, llist_add decides: refusals, re-arms, give-backs (entry points retry)",
    ),
    # The promise "the next push or entry point retries" after a refusal
    # (RETRY_AT_PUSH: a push after the refusal ends the excuse `owed`).
    Check(
        "liveness_refusal_retry_at_push_nr",
        _base(2, 1) + ("LIVENESS", "RETRY_AT_PUSH") + _NR,
        liveness=True,
        why="after a refusal the next push retries (the rule the code has)",
    ),
    Check(
        "one_word_llist_retry_at_push_nr",
        _base(2, 1) + ("LIVENESS", "RETRY_AT_PUSH") + _NR + ("ONE_WORD", "ONE_WORD_LLIST"),
        liveness=True,
        expect_error=True,
        why=(
            "llist_add decides: a push onto the refused claimant's non-empty list never "
            "retries; the item waits for an entry point"
        ),
    ),
    # The two defects of the rule before the fixes, found with the retrier.
    Check(
        "records_first",
        _base(2, 3, 1) + _LIVE + ("RECORDS_FIRST", "NO_MAIN_REARM"),
        liveness=True,
        expect_error=True,
        why=(
            "call_ran reads the records before it takes the claim back: a re-arm overtakes the "
            "running call"
        ),
    ),
    Check(
        "drop_clock",
        _base(2, 3, 2) + _LIVE + ("DROP_CLOCK",),
        liveness=True,
        expect_error=True,
        why=(
            "a look that takes the stale claim and may not re-arm drops its clock: never stale "
            "again"
        ),
    ),
]


# The cuda-core 1.2 drain (tests/model/cuda_core.pml): the shipped tail, whose
# re-check may take effect before its clear (store buffering), must lose a
# wakeup; the minimal fix (cuda-core-1.2-fixed: fences, the tail in program
# order) must not.  Three producers and two entry points: well under a second.
def _cc(*macros: str) -> tuple[str, ...]:
    return ("N=3", "K=2", "ENTRIES=2", *macros)


def _cc_safety(name: str, shape: str, label: str) -> Check:
    """The safety check of one cuda-core drain shape (no LIVENESS).

    :param name: the check's name less ``_safety`` (str)
    :param shape: the shape's macro of cuda_core.pml, CC_SHIPPED or CC_FIXED (str)
    :param label: the variant as its ``why`` names it (str)
    :returns: the Check
    """
    return Check(
        f"{name}_safety",
        _cc(shape),
        model=CC_MODEL,
        why=f"{label}: never more cleanups than items, at most one of our calls queued",
    )


CHECKS += [
    Check(
        "cuda_core",
        _cc("CC_SHIPPED", "LIVENESS"),
        liveness=True,
        expect_error=True,
        model=CC_MODEL,
        why=(
            "cuda-core 1.2's drain tail: the re-check reads an empty list before the clear is "
            "seen, a producer's claim reads the old flag: an item is stranded"
        ),
    ),
    _cc_safety("cuda_core", "CC_SHIPPED", "cuda-core 1.2"),
    Check(
        "cuda_core_fixed",
        _cc("CC_FIXED", "LIVENESS"),
        liveness=True,
        model=CC_MODEL,
        why="cuda-core-1.2-fixed (fences: the tail in program order): every item is taken",
    ),
    _cc_safety("cuda_core_fixed", "CC_FIXED", "cuda-core-1.2-fixed"),
]
CC_WITNESSES = {
    1: "the drain's re-check finds an item and schedules a new pending call",
    2: "every item is cleaned",
}
for _w, _why in CC_WITNESSES.items():
    CHECKS.append(
        Check(
            f"cuda_core_fixed_witness{_w}",
            _cc("CC_FIXED", f"WITNESS={_w}"),
            expect_error=True,
            model=CC_MODEL,
            why=_why,
        )
    )
WITNESSES = {
    1: "Py_AddPendingCall refuses",
    2: "a late callback backs out of the closed gate after teardown",
    3: "a drain takes a second batch that arrived while it ran",
    4: "an entry point drains directly",
    5: "shutdown waits out a producer inside the gate",
    6: "an item is leaked at shutdown",
    7: "a pending call runs after the host died, as a no-op",
    8: "every item is cleaned",
    9: "a chance to re-arm after a lost call",
    10: "two of our pending calls are queued (a re-arm)",
    11: "the host loses a pending call",
    12: "a re-armed call runs after a loss and clears scheduled_",
    13: "a refused re-arm whose old call ran gives the claim back (and retries)",
    14: "a re-arm's move_claim_seq fails: the claim's call ran meanwhile",
    15: "three of our pending calls are queued (the main thread's re-arm)",
    16: "a caller that may not re-arm gives the stale claim's clock back",
    17: "a look off the main thread takes a stale claim at the bound (take_supersede fails)",
}
# Witnesses 1 and 13 are reached soonest with a ring of one (13: the
# re-arm's call refused while the claim's call is queued); 15 needs room for
# three of our calls and two losses.
_WITNESS_MACROS = {1: _base(2, 1), 13: _base(2, 1), 15: _base(2, 3, 2)}
for _w, _why in WITNESSES.items():
    CHECKS.append(
        Check(
            f"witness{_w}",
            _WITNESS_MACROS.get(_w, _base(2, 2, 1)) + (f"WITNESS={_w}",),
            expect_error=True,
            why=_why,
        )
    )


# Candidate rules checked by the opt-in --variant run: the macros added to
# every check that verifies the rule.
VARIANTS = {
    "flag-seq": ("FLAG_SEQ",),
    "one-word": ("ONE_WORD",),
    "one-word-llist": ("ONE_WORD", "ONE_WORD_LLIST"),
}


# The cuda-core drain's recorded runs (docs/_data/model-cuda-core*.json):
# the cuda_core checks of CHECKS that carry the shape's macro, as they are.
CC_VARIANTS = {"cuda-core": ("CC_SHIPPED",), "cuda-core-fixed": ("CC_FIXED",)}


def variant_checks(name: str) -> list[Check]:
    """The checks that verify the rule, with variant `name`'s macros added.

    Args:
        name: a key of VARIANTS.
    Returns:
        list of Check named "<name>:<check>", expect_error False (the rule's
        own expectation; the run reports what spin found).  Checks that
        already carry a candidate's macro (the bounded candidate checks) are
        left out.
        For a key of CC_VARIANTS instead: the checks of the cuda-core model
        that carry its macro, witnesses left out (test_model.py runs them),
        unchanged but for the name, with their own expectation.
    Raises:
        KeyError: no such variant.
    """
    if name in CC_VARIANTS:
        return [
            dataclasses.replace(c, name=f"{name}:{c.name}")
            for c in CHECKS
            if c.model == CC_MODEL
            and set(CC_VARIANTS[name]) <= set(c.macros)
            and not any(m.startswith("WITNESS=") for m in c.macros)
        ]
    extra = VARIANTS[name]
    candidate = {m for ms in VARIANTS.values() for m in ms}
    return [
        dataclasses.replace(c, name=f"{name}:{c.name}", macros=c.macros + extra)
        for c in CHECKS
        if c.model == MODEL
        and not c.expect_error
        and not c.by_hand
        and not candidate & set(c.macros)
    ]


def _num(rx: str, text: str, cast=int):
    m = re.search(rx, text, re.M)
    return cast(m.group(1)) if m else None


def parse_pan(out: str) -> dict:
    """Parse pan's report.

    Args:
        out: pan's stdout+stderr (str).
    Returns:
        dict with errors, states_stored, states_matched, transitions, depth,
        memory_mb, time_s (numbers or None) and unreached (list of str).
    """
    unreached = []
    for block in re.finditer(
        r"^unreached in (proctype|init|claim) ?(\S*)\n((?:\t.*\n)*)", out, re.M
    ):
        for line in block.group(3).splitlines():
            line = line.strip()
            if line and not line.startswith("("):
                unreached.append(f"{block.group(2) or block.group(1)}: {line}")
    return {
        "errors": _num(r"errors: (\d+)", out),
        "states_stored": _num(r"^\s*(\d+) states, stored", out),
        "states_matched": _num(r"^\s*(\d+) states, matched", out),
        "transitions": _num(r"^\s*(\d+) transitions", out),
        "depth": _num(r"depth reached (\d+)", out),
        "memory_mb": _num(r"^\s*([\d.]+)\s+total actual memory usage", out, float),
        "time_s": _num(r"pan: elapsed time ([\d.e+-]+) seconds", out, float),
        "unreached": unreached,
        "assertion": (re.search(r"^pan:\d+: (assertion violated .*)$", out, re.M) or [None, None])[
            1
        ],
        "acceptance_cycle": bool(re.search(r"acceptance cycle", out)),
    }


def _cpu_limit(cpu_s: float | None):
    """preexec_fn for subprocess: RLIMIT_CPU of cpu_s seconds (the kernel sends
    SIGXCPU there, SIGKILL 10 s later), or None for no limit."""
    if cpu_s is None:
        return None
    soft = max(1, int(cpu_s))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 10))

    return limit


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_check(
    check: Check, workdir: Path, timeout: float = 300, cpu_s: float | None = None
) -> dict:
    """Generate, compile and run one pan verifier.

    Args:
        check: the Check to run.
        workdir: an empty scratch directory (Path).
        timeout: wall-clock seconds for each of spin, gcc and pan.
        cpu_s: CPU seconds (user + system) each of spin, gcc's processes and
            pan may use (RLIMIT_CPU), or None for no limit.  A CPU budget
            holds whatever the machine's load; ``timeout`` is then only a
            hang guard.
    Returns:
        parse_pan()'s dict plus name, macros, expect_error, why, wall_s,
        cpu_s (pan's CPU seconds), cpu_budget_exceeded (pan was stopped by
        RLIMIT_CPU) and the raw pan output ("output").
    Raises:
        RuntimeError: spin or gcc failed (a CPU budget exceeded included).
        subprocess.TimeoutExpired: a step ran past timeout.
    """
    model = check.model
    shutil.copy(model, workdir / model.name)
    d = [f"-D{m}" for m in check.macros]
    t0 = time.monotonic()
    p = subprocess.run(
        ["spin", *d, "-a", model.name],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_cpu_limit(cpu_s),
    )
    if p.returncode != 0 or not (workdir / "pan.c").exists():
        raise RuntimeError(f"spin -a failed for {check.name}:\n{p.stdout}{p.stderr}")
    cflags = ["-O0" if check.name.startswith("witness") else "-O2", *PAN_CFLAGS]
    if check.liveness:
        cflags.append("-DNFAIR=4")  # weak fairness over all processes
    else:
        cflags.append("-DSAFETY")
    # Compile, then link: ccache (when installed; it is in the Debian root's
    # package list, tools/sid-root.sh) caches compilations only, not a
    # compile-and-link in one call.  spin -a writes the same pan.c for the same
    # model and macros, so an unchanged model costs no gcc -O2 (about 6 CPU s a
    # check here); ccache's key is the preprocessed pan.c, the compiler and
    # the flags, so any change to the model is compiled anew.  Its cache is
    # ccache's default directory (CCACHE_DIR when set).
    cc = ["ccache", "gcc"] if shutil.which("ccache") else ["gcc"]
    for argv in ([*cc, *cflags, "-c", "-o", "pan.o", "pan.c"], ["gcc", "-o", "pan", "pan.o"]):
        p = subprocess.run(
            argv,
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=_cpu_limit(cpu_s),
        )
        if p.returncode != 0:
            raise RuntimeError(f"gcc failed for {check.name}:\n{p.stdout}{p.stderr}")
    args = ["./pan", f"-m{DEPTH_BOUND}"]
    if check.liveness:
        args += ["-a", "-f", "-N", "drained"]
    c0 = _children_cpu_s()
    p = subprocess.run(
        args,
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_cpu_limit(cpu_s),
    )
    pan_cpu = _children_cpu_s() - c0
    out = p.stdout + p.stderr
    r = parse_pan(out)
    r.update(
        name=check.name,
        macros=list(check.macros),
        liveness=check.liveness,
        expect_error=check.expect_error,
        why=check.why,
        wall_s=round(time.monotonic() - t0, 2),
        cpu_s=round(pan_cpu, 2),
        cpu_budget_exceeded=(
            cpu_s is not None and p.returncode in (-signal.SIGXCPU, -signal.SIGKILL)
        ),
        output=out,
        trail=(workdir / f"{model.name}.trail").exists(),
    )
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--only", help="comma-separated check names")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directories")
    ap.add_argument(
        "--variant",
        choices=sorted({**VARIANTS, **CC_VARIANTS}),
        help="run a candidate rule's checks",
    )
    a = ap.parse_args(argv)
    checks = variant_checks(a.variant) if a.variant else CHECKS
    if a.only:
        want = a.only.split(",")
        checks = [c for c in checks if c.name in want or c.name.split(":")[-1] in want]
    if a.list:
        for c in checks:
            print(f"{c.name:22} {' '.join(c.macros):48} {c.why}")
        return 0
    results, bad = [], 0
    for c in checks:
        with tempfile.TemporaryDirectory(prefix=f"spin-{c.name}-") as tmp:
            r = run_check(c, Path(tmp), timeout=1800 if a.variant else 300)
            if a.keep:
                shutil.copytree(
                    tmp,
                    Path(tempfile.gettempdir()) / f"spin-{c.name.replace(':', '-')}",
                    dirs_exist_ok=True,
                )
        ok = (r["errors"] or 0) > 0 if c.expect_error else r["errors"] == 0
        bad += not ok
        print(
            f"{'ok ' if ok else 'BAD'} {c.name:22} errors={r['errors']} "
            f"states={r['states_stored']} "
            f"depth={r['depth']} time={r['wall_s']}s {r['assertion'] or ''}",
            flush=True,
        )
        if a.variant:  # a record: pan's summary, not its whole report
            r["output"] = r["output"][-1500:]
            r["unreached"] = len(r["unreached"])
        results.append(r)
    if a.json:
        if a.variant:
            macros = {**VARIANTS, **CC_VARIANTS}[a.variant]
            record = {"variant": a.variant, "macros": list(macros), "checks": results}
            a.json.write_text(json.dumps(record, indent=1) + "\n")
        else:
            a.json.write_text(json.dumps(results, indent=1))
    return 1 if bad and not a.variant else 0


if __name__ == "__main__":
    sys.exit(main())
